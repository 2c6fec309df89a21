//! Who may change a file in Windows' model: its owner and the grants of
//! its access-control list ([`Security`]), and the rule the permission
//! check applies to them ([`judge`]). Plain data and a pure function, so
//! the rule is tested on every system; reading a real file's security
//! descriptor is `acl`'s (Windows only).

// Used by the Windows check alone; compiled and tested everywhere.
#![cfg_attr(not(windows), allow(dead_code))]

/// An account, by its SID (`S-1-1-0`) and, where Windows knows it, its
/// name (`Everyone`, `BUILTIN\Users`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The SID in its string form.
    pub sid: String,
    /// `DOMAIN\name`, or the name alone, when the SID can be looked up.
    pub name: Option<String>,
}

impl std::fmt::Display for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{name} ({})", self.sid),
            None => f.write_str(&self.sid),
        }
    }
}

/// One entry of a DACL that grants rights.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Whom.
    pub account: Account,
    /// The access mask granted.
    pub mask: u32,
}

/// What decides who may change a file or directory.
#[derive(Debug, Clone)]
pub struct Security {
    /// Its owner, who may always change its DACL.
    pub owner: Account,
    /// The DACL's grants that apply to the entry itself (inherit-only
    /// entries left out), or `None` when it has no DACL: then everyone has
    /// every right.
    pub grants: Option<Vec<Grant>>,
    /// Grants of a kind not read here (object or callback entries): their
    /// type numbers. The caller refuses what it cannot read.
    pub unread: Vec<u8>,
}

/// What the rule says of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessVerdict {
    /// Only trusted accounts can change it.
    Safe,
    /// It belongs to an untrusted account (an owner may always change its
    /// access-control list).
    Owner(Account),
    /// An untrusted account is granted a right that changes it.
    Granted {
        /// The account, as shown.
        account: String,
        /// Its SID.
        sid: String,
        /// The rights that change it, named.
        rights: String,
    },
    /// An allowing entry of a kind not read (its type number): refused,
    /// since what it grants is unknown.
    Unread(u8),
}

/// The accounts trusted besides the user running guardhost: SYSTEM, the
/// Administrators group, TrustedInstaller, and OWNER RIGHTS (what it grants
/// goes to the owner, who is judged on its own).
pub const TRUSTED_SIDS: [&str; 4] =
    ["S-1-5-18", "S-1-5-32-544", "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464", "S-1-3-4"];

/// The rights that change a file, with their names for messages.
pub const FILE_RIGHTS: [(u32, &str); 7] = [
    (0x0000_0002, "write"),
    (0x0000_0004, "append"),
    (0x0001_0000, "delete"),
    (0x0004_0000, "change permissions"),
    (0x0008_0000, "take ownership"),
    (0x1000_0000, "full control"),
    (0x4000_0000, "generic write"),
];

/// The rights that change what a directory holds or the directory itself.
/// Adding entries (`0x2`, `0x4`) is not among them: it cannot replace an
/// entry that is there, and drive roots grant it to every user.
pub const DIRECTORY_RIGHTS: [(u32, &str); 6] = [
    (0x0000_0040, "delete what it holds"),
    (0x0001_0000, "delete"),
    (0x0004_0000, "change permissions"),
    (0x0008_0000, "take ownership"),
    (0x1000_0000, "full control"),
    (0x4000_0000, "generic write"),
];

/// Judges one entry (a directory when `is_dir`) for the user `me` (a SID):
/// its owner must be `me` or trusted; an entry of a kind not read is
/// refused; no DACL at all grants everyone everything; and no untrusted
/// account may hold a right that changes it.
pub fn judge(security: &Security, is_dir: bool, me: &str) -> AccessVerdict {
    let trusted = |sid: &str| sid == me || TRUSTED_SIDS.contains(&sid);
    if !trusted(&security.owner.sid) {
        return AccessVerdict::Owner(security.owner.clone());
    }
    if let Some(kind) = security.unread.first() {
        return AccessVerdict::Unread(*kind);
    }
    let Some(grants) = &security.grants else {
        return AccessVerdict::Granted {
            account: "everyone".into(),
            sid: "S-1-1-0".into(),
            rights: "every right (it has no access-control list at all)".into(),
        };
    };
    let rights: &[(u32, &str)] = if is_dir { &DIRECTORY_RIGHTS } else { &FILE_RIGHTS };
    for grant in grants.iter().filter(|grant| !trusted(&grant.account.sid)) {
        let named: Vec<&str> =
            rights.iter().filter(|(bit, _)| grant.mask & bit != 0).map(|(_, name)| *name).collect();
        if !named.is_empty() {
            return AccessVerdict::Granted {
                account: grant.account.to_string(),
                sid: grant.account.sid.clone(),
                rights: named.join(", "),
            };
        }
    }
    AccessVerdict::Safe
}

#[cfg(test)]
mod tests {
    use super::{judge, AccessVerdict, Account, Grant, Security};

    const ME: &str = "S-1-5-21-1-2-3-1001";

    fn account(sid: &str, name: &str) -> Account {
        Account { sid: sid.into(), name: Some(name.into()) }
    }

    /// Owned by `owner`, granting `grants` (SID, mask).
    fn security(owner: &str, grants: &[(&str, u32)]) -> Security {
        Security {
            owner: account(owner, "owner"),
            grants: Some(
                grants
                    .iter()
                    .map(|(sid, mask)| Grant { account: account(sid, "someone"), mask: *mask })
                    .collect(),
            ),
            unread: Vec::new(),
        }
    }

    /// A usual user folder: full control for SYSTEM, the administrators and
    /// the user; read and execute for Users.
    const USUAL: [(&str, u32); 4] =
        [("S-1-5-18", 0x1f01ff), ("S-1-5-32-544", 0x1f01ff), (ME, 0x1f01ff), ("S-1-5-32-545", 0x1200a9)];

    #[test]
    fn the_user_the_system_and_the_administrators_may_change_it_others_may_read() {
        assert_eq!(judge(&security(ME, &USUAL), false, ME), AccessVerdict::Safe);
        assert_eq!(judge(&security(ME, &USUAL), true, ME), AccessVerdict::Safe);
        assert_eq!(
            judge(&security("S-1-5-32-544", &USUAL), false, ME),
            AccessVerdict::Safe,
            "owned by the administrators"
        );
        assert_eq!(
            judge(
                &security("S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464", &USUAL),
                true,
                ME
            ),
            AccessVerdict::Safe,
            "owned by TrustedInstaller"
        );
    }

    #[test]
    fn a_right_that_changes_it_granted_to_another_account_is_named() {
        let mut grants = USUAL.to_vec();
        grants.push(("S-1-5-11", 0x0001_0116)); // Authenticated Users: write, append, delete
        let AccessVerdict::Granted { sid, rights, .. } = judge(&security(ME, &grants), false, ME) else {
            panic!()
        };
        assert_eq!((sid.as_str(), rights.as_str()), ("S-1-5-11", "write, append, delete"));
        // On a directory, adding entries is harmless; deleting them is not.
        assert_eq!(judge(&security(ME, &[("S-1-5-11", 0x0000_0006)]), true, ME), AccessVerdict::Safe);
        let AccessVerdict::Granted { rights, .. } =
            judge(&security(ME, &[("S-1-5-11", 0x0000_0046)]), true, ME)
        else {
            panic!()
        };
        assert_eq!(rights, "delete what it holds");
        // Generic rights count too.
        let AccessVerdict::Granted { rights, .. } =
            judge(&security(ME, &[("S-1-1-0", 0x1000_0000)]), false, ME)
        else {
            panic!()
        };
        assert_eq!(rights, "full control");
    }

    #[test]
    fn another_owner_no_list_and_an_unread_entry_are_refused() {
        assert!(
            matches!(judge(&security("S-1-5-21-9-9-9-2000", &USUAL), false, ME), AccessVerdict::Owner(a) if a.sid == "S-1-5-21-9-9-9-2000")
        );
        let open = Security { grants: None, ..security(ME, &[]) };
        assert!(matches!(judge(&open, false, ME), AccessVerdict::Granted { sid, .. } if sid == "S-1-1-0"));
        let unread = Security { unread: vec![5], ..security(ME, &USUAL) };
        assert_eq!(judge(&unread, false, ME), AccessVerdict::Unread(5));
    }

    #[test]
    fn an_account_shows_its_name_and_sid() {
        assert_eq!(account("S-1-1-0", "Everyone").to_string(), "Everyone (S-1-1-0)");
        assert_eq!(Account { sid: "S-1-1-0".into(), name: None }.to_string(), "S-1-1-0");
    }
}
