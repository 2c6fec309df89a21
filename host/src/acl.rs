//! Reading who may change a file on Windows: its owner and the grants of
//! its discretionary access-control list (DACL), from its security
//! descriptor, as [`crate::access`] describes them, for
//! [`crate::permissions`]. Windows only; this is the FFI
//! boundary to `advapi32`, so it holds the module's `unsafe`, each block
//! with its reason.
#![allow(unsafe_code)]

use std::os::windows::ffi::OsStrExt;
use std::path::Path;

use crate::access::{Account, Grant, Security};

use windows_sys::Win32::Foundation::{LocalFree, ERROR_SUCCESS, HANDLE, HLOCAL};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, GetNamedSecurityInfoW, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    GetAce, GetTokenInformation, LookupAccountSidW, TokenUser, ACE_HEADER, ACL, DACL_SECURITY_INFORMATION,
    OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID, SID_NAME_USE, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// `ACCESS_ALLOWED_ACE_TYPE`, and the allowing kinds that carry more than a
/// mask and a SID (object, callback, callback-object).
const ACCESS_ALLOWED: u8 = 0;
const ALLOWING_OTHERS: [u8; 3] = [5, 9, 11];
/// `INHERIT_ONLY_ACE`: the entry applies to children, not to this entry.
const INHERIT_ONLY: u8 = 0x08;

/// Frees with `LocalFree` what the system allocated for us.
struct Local(HLOCAL);

impl Drop for Local {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from an API that documents freeing
            // it with LocalFree, and is freed once, here.
            unsafe { LocalFree(self.0) };
        }
    }
}

/// The owner and DACL of the file or directory at `path`.
pub(crate) fn read(path: &Path) -> std::io::Result<Security> {
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let mut owner: PSID = std::ptr::null_mut();
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: `wide` is a NUL-terminated UTF-16 path; the out-pointers are
    // valid for writes; the owner and DACL point into `descriptor`, which
    // is freed (by `Local`) only after they are last used below.
    let status = unsafe {
        GetNamedSecurityInfoW(
            wide.as_ptr(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut descriptor,
        )
    };
    if status != ERROR_SUCCESS {
        return Err(std::io::Error::from_raw_os_error(status as i32));
    }
    let _descriptor = Local(descriptor);
    if owner.is_null() {
        return Err(std::io::Error::other("its security descriptor names no owner"));
    }
    let owner = account(owner)?;
    if dacl.is_null() {
        return Ok(Security { owner, grants: None, unread: Vec::new() });
    }
    // SAFETY: a non-null DACL from GetNamedSecurityInfoW points to a whole
    // ACL inside the descriptor; its header is read as a plain struct.
    let count = unsafe { (*dacl).AceCount };
    let mut grants = Vec::new();
    let mut unread = Vec::new();
    for index in 0..u32::from(count) {
        let mut entry: *mut core::ffi::c_void = std::ptr::null_mut();
        // SAFETY: `index` is below the ACL's own entry count, and `entry`
        // is valid for the write.
        if unsafe { GetAce(dacl, index, &mut entry) } == 0 || entry.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: every ACE starts with an ACE_HEADER, and GetAce returned
        // a pointer to one inside the ACL.
        let header = unsafe { *(entry as *const ACE_HEADER) };
        if header.AceFlags & INHERIT_ONLY != 0 {
            continue;
        }
        if header.AceType == ACCESS_ALLOWED {
            // SAFETY: an ACCESS_ALLOWED_ACE is the header, a 4-byte mask,
            // then the SID, which GetAce's ACL holds whole (AceSize covers
            // it). The mask is read unaligned, as bytes.
            let (mask, sid) = unsafe {
                let mask_at = (entry as *const u8).add(std::mem::size_of::<ACE_HEADER>());
                let mask = std::ptr::read_unaligned(mask_at as *const u32);
                (mask, mask_at.add(4) as PSID)
            };
            grants.push(Grant { account: account(sid)?, mask });
        } else if ALLOWING_OTHERS.contains(&header.AceType) {
            unread.push(header.AceType);
        }
        // Denying and auditing entries only take rights away: left out,
        // so the rights read are at most those given.
    }
    Ok(Security { owner, grants: Some(grants), unread })
}

/// The SID of the user this process runs as.
pub(crate) fn current_user() -> std::io::Result<String> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo-handle of the current process needs no closing;
    // `token` is valid for the write.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    struct Token(HANDLE);
    impl Drop for Token {
        fn drop(&mut self) {
            // SAFETY: a handle OpenProcessToken opened, closed once.
            unsafe { windows_sys::Win32::Foundation::CloseHandle(self.0) };
        }
    }
    let token = Token(token);
    // TOKEN_USER is a pointer and attributes, followed by the SID it points
    // to: a buffer of u64 keeps it aligned.
    let mut buffer = vec![0u64; 64];
    let mut needed = 0u32;
    // SAFETY: the buffer is valid for `len` bytes of writes, and `needed`
    // for one u32.
    let ok = unsafe {
        GetTokenInformation(
            token.0,
            TokenUser,
            buffer.as_mut_ptr().cast(),
            (buffer.len() * 8) as u32,
            &mut needed,
        )
    };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: on success the buffer starts with a TOKEN_USER whose SID
    // pointer points into the same buffer, alive until the end of this
    // function.
    let sid = unsafe { (*(buffer.as_ptr() as *const TOKEN_USER)).User.Sid };
    Ok(sid_string(sid)?)
}

/// The SID's string form and, when it can be looked up, its name.
fn account(sid: PSID) -> std::io::Result<Account> {
    Ok(Account { sid: sid_string(sid)?, name: name_of(sid) })
}

fn sid_string(sid: PSID) -> std::io::Result<String> {
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: `sid` points to a valid SID (from a descriptor or a token);
    // `text` is valid for the write.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let _text = Local(text.cast());
    // SAFETY: ConvertSidToStringSidW returns a NUL-terminated string,
    // freed (by `_text`) after it is copied here.
    Ok(unsafe { wide_to_string(text) })
}

fn name_of(sid: PSID) -> Option<String> {
    let mut name = [0u16; 256];
    let mut domain = [0u16; 256];
    let (mut name_len, mut domain_len) = (name.len() as u32, domain.len() as u32);
    let mut kind: SID_NAME_USE = 0;
    // SAFETY: the buffers are valid for the lengths given, which the call
    // updates; `sid` points to a valid SID.
    let ok = unsafe {
        LookupAccountSidW(
            std::ptr::null(),
            sid,
            name.as_mut_ptr(),
            &mut name_len,
            domain.as_mut_ptr(),
            &mut domain_len,
            &mut kind,
        )
    };
    if ok == 0 {
        return None;
    }
    let name = String::from_utf16_lossy(&name[..name_len as usize]);
    let domain = String::from_utf16_lossy(&domain[..domain_len as usize]);
    Some(if domain.is_empty() { name } else { format!("{domain}\\{name}") })
}

/// A NUL-terminated UTF-16 string, copied.
///
/// # Safety
/// `text` points to a NUL-terminated UTF-16 string.
unsafe fn wide_to_string(text: *const u16) -> String {
    let mut len = 0;
    // SAFETY: the caller promises a terminating NUL, so every unit read up
    // to it is inside the string.
    while unsafe { *text.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: the `len` units before the NUL are the string's.
    String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) })
}

/// Gives the file or directory at `path` the owner and DACL an SDDL string
/// describes (`O:WDD:(A;;FA;;;WD)`: owned by Everyone, who may do
/// anything), for the permission rule's tests.
#[cfg(test)]
pub(crate) fn set_for_test(path: &Path, sddl: &str) -> std::io::Result<()> {
    use windows_sys::Win32::Security::Authorization::{
        ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
    };
    use windows_sys::Win32::Security::SetFileSecurityW;
    let text: Vec<u16> = sddl.encode_utf16().chain(Some(0)).collect();
    let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: `text` is NUL-terminated; `descriptor` is valid for the write
    // and freed by `Local`; the size is not asked for.
    let ok = unsafe {
        ConvertStringSecurityDescriptorToSecurityDescriptorW(
            text.as_ptr(),
            SDDL_REVISION_1,
            &mut descriptor,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let descriptor = Local(descriptor);
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let what = if sddl.starts_with("O:") {
        OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION
    } else {
        DACL_SECURITY_INFORMATION
    };
    // SAFETY: `wide` is a NUL-terminated path and the descriptor a valid
    // one, alive for the call.
    if unsafe { SetFileSecurityW(wide.as_ptr(), what, descriptor.0) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
