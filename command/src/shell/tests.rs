//! The flattening's cases: every simple command found, words read after
//! quote removal, the caps refusing before parsing.

use super::*;

fn lits(script: &Script) -> Vec<Vec<String>> {
    script
        .commands
        .iter()
        .filter(|c| !c.words.is_empty())
        .map(|c| c.words.iter().map(|w| w.lit().unwrap_or("<dyn>").to_owned()).collect())
        .collect()
}

#[test]
fn every_simple_command_is_found_with_its_words_unquoted() {
    let script =
        parse(r#"cd /x && "rm" -rf '/' ; echo "$(curl x)" | sh; f() { g; }; (h) & i <(j) > k"#).unwrap();
    assert_eq!(
        lits(&script),
        vec![
            vec!["cd", "/x"],
            vec!["rm", "-rf", "/"],
            vec!["echo", "<dyn>"],
            vec!["curl", "x"],
            vec!["sh"],
            vec!["g"],
            vec!["h"],
            vec!["i", "<dyn>"],
            vec!["j"],
        ]
    );
    let curl = script.commands.iter().position(|c| c.name() == Some("curl")).unwrap();
    let echo = script.commands.iter().position(|c| c.name() == Some("echo")).unwrap();
    assert_eq!(script.commands[curl].parent, Some(echo));
    assert_eq!(script.commands[curl].via, Via::CommandSubstitution);
    assert_eq!(script.functions, vec![Function { name: "f".into() }]);
    let h = script.commands.iter().find(|c| c.name() == Some("h")).unwrap();
    assert!(h.background);
    let i = script.commands.iter().find(|c| c.name() == Some("i")).unwrap();
    assert_eq!(i.redirects, vec![Redirect { kind: RedirectKind::Write, target: Word::Lit("k".into()) }]);
}

#[test]
fn quotes_escapes_and_expansions() {
    let script = parse(r#"\rm $'\x72m' a"b"c ~/x "$HOME" rm${IFS}-rf "$D"/*"#).unwrap();
    let words = &script.commands[0].words;
    assert_eq!(words[0], Word::Lit("rm".into()));
    assert_eq!(words[1], Word::Lit("rm".into()));
    assert_eq!(words[2], Word::Lit("abc".into()));
    assert_eq!(words[3], Word::Lit("~/x".into()));
    assert_eq!(words[4], Word::Lit("~".into()));
    let Word::Dyn(ifs) = &words[5] else { panic!("{:?}", words[5]) };
    assert_eq!(ifs.split, vec!["rm", "-rf"]);
    let Word::Dyn(glob) = &words[6] else { panic!() };
    assert_eq!(glob.without, "/*");
}

#[test]
fn substitutions_everywhere_are_found() {
    for command in [
        "echo ${x:-$(id)}",
        "echo $((1 + $(id)))",
        "[[ -n $(id) ]]",
        "for x in $(id); do :; done",
        "case $(id) in *) ;; esac",
        "cat <<EOF\n$(id)\nEOF",
        "cat <<< $(id)",
        "x=$(id)",
        "echo `id`",
        "echo \"`echo \\`id\\``\"",
        "(( $(id) ))",
        "declare y=$(id)",
    ] {
        let script = parse(command).unwrap_or_else(|e| panic!("{command}: {e:?}"));
        assert!(script.commands.iter().any(|c| c.name() == Some("id")), "{command}: {script:?}");
    }
}

/// Plain commands are read without the parser, as the parser reads
/// them.
#[test]
fn plain_commands_read_as_the_parser_reads_them() {
    for command in [
        "ls -la /mnt/user-data/workspace",
        "git status --short",
        "python3 main.py --out=x.json -v",
        "echo a*b? c:d e,f g@h 100% x^y",
        "make\t-j4  all",
        "ls x=1",
        "cat",
    ] {
        assert!(plain(command).is_some(), "{command}");
        let mut parsed = Script::default();
        parsed.add(command, None, Via::Direct).unwrap();
        assert_eq!(parse(command).unwrap().commands, parsed.commands, "{command}");
    }
    for command in
        ["x=1 ls", "if", "time ls", "for", "ls ~", "ls # c", "ls; id", "ls\nid", "[[ x ]]", "ls 'a'"]
    {
        assert!(plain(command).is_none(), "{command}");
    }
}

#[test]
fn caps_refuse_before_parsing() {
    assert_eq!(parse(&"a".repeat(MAX_COMMAND_BYTES + 1)), Err(Unreadable::TooLong));
    assert_eq!(parse(&format!("echo {}", "$(".repeat(MAX_NESTING + 1))), Err(Unreadable::TooDeep));
    assert!(matches!(parse("echo 'unterminated"), Err(Unreadable::Syntax(_))));
    assert_eq!(nesting("if a; then b; fi; if c; then d; fi"), 1);
    assert_eq!(nesting("echo $(a $(b)) ${c}"), 2);
}
