use super::*;
use guardhost::denied_message;
use guardhost::GuardrailDecision;

fn denied(line: &str) -> ToolMessage {
    let call = parse_line(1, line.as_bytes()).unwrap();
    denied_message(&call.tool_call, &GuardrailDecision::with_reason(false, "c", "m"))
}

#[test]
fn the_arguments_text_is_the_lines_own_and_the_call_the_same() {
    let lines: [(&[u8], Option<&str>); 6] = [
        (
            br#"{"name": "bash", "args": { "command" : "ls\u0020-la" }, "id": "c"}"#,
            Some(r#"{ "command" : "ls\u0020-la" }"#),
        ),
        (
            br#"{"args": {"n": 1.50, "deep": {"a": [1, 2]}}, "name": "x"}"#,
            Some(r#"{"n": 1.50, "deep": {"a": [1, 2]}}"#),
        ),
        // No mapping, no text.
        (br#"{"name": "ls", "args": null}"#, None),
        (br#"{"name": "ls"}"#, None),
        // A line the fast path leaves to the general one (a number for
        // a name): the call, without the text.
        (br#"{"name": 7, "args": {"a": 1}}"#, None),
        (br#"{"name": "ls", "args": {}}"#, Some("{}")),
    ];
    for (line, expected) in lines {
        let (call, text) = parse_line_with_args_text(1, line).unwrap();
        assert_eq!(text, expected, "{}", String::from_utf8_lossy(line));
        assert_eq!(call, parse_line(1, line).unwrap());
        if let Some(text) = text {
            assert_eq!(serde_json::from_str::<Map<String, Value>>(text).unwrap(), call.tool_call.args);
        }
    }
    // What the plain parse refuses, this refuses with the same answer.
    for line in [&br#"{"name": "x", "args": {"a": 1, "a": 2}}"#[..], b"{", br#"{"args": [1]}"#] {
        assert_eq!(parse_line_with_args_text(4, line).unwrap_err(), parse_line(4, line).unwrap_err());
    }
}

#[test]
fn null_ids_and_names_read_as_deerflow_reads_them() {
    let m = denied(r#"{"name": null, "id": null}"#);
    assert_eq!((m.tool_call_id.as_str(), m.name.as_deref()), ("None", Some("None")));
    let m = denied(r#"{}"#);
    assert_eq!((m.tool_call_id.as_str(), m.name.as_deref()), ("missing_id", Some("unknown_tool")));
    let m = denied(r#"{"name": 7, "id": 42}"#);
    assert_eq!((m.tool_call_id.as_str(), m.name.as_deref()), ("42", Some("7")));
    assert!(m.content.starts_with("Guardrail denied: tool '7' was blocked"), "{}", m.content);
    // The request's tool_call_id stays null, as DeerFlow's does.
    let call = parse_line(1, br#"{"name": "ls", "id": null}"#).unwrap();
    assert_eq!(call.tool_call.id, None);
    assert!(call.tool_call.null_id);
}

#[test]
fn a_list_or_mapping_name_is_refused_by_name() {
    let error = parse_line(3, br#"{"name": ["a"], "id": "c1"}"#).unwrap_err();
    assert!(error.content.contains("`name` must be a string, found a list"), "{}", error.content);
    assert_eq!(error.tool_call_id, "c1");
    let error = parse_line(3, br#"{"name": "ls", "id": {"a": 1}}"#).unwrap_err();
    assert!(error.content.contains("`id` must be a string, found a mapping"), "{}", error.content);
}

#[test]
fn the_fast_path_reads_every_line_as_the_general_path_does() {
    let lines: &[&[u8]] = &[
        br#"{"name": "read_file", "args": {"path": "README.md"}, "id": "c1", "context": {"thread_id": "t"}}"#,
        br#"{"name":"ls","args":{"z":1,"a":[1,{"y":null}]},"id":"k","type":"tool_call"}"#,
        br#"{"n\u0061me":"l\"s\n","args":{"s":"\u00e9 \ud83d\ude00 \/"},"id":"\u0041"}"#,
        "{\"name\":\"ls\",\"args\":{\"s\":\"é 日本\"},\"id\":\"ü\"}".as_bytes(),
        br#"{"name":"ls","args":{"f":1.5,"e":1e5,"n":-0,"big":12345678901234567890,"x":0.1}}"#,
        br#"{"name":"ls","args":{"dup":1,"dup":2},"name":"bash"}"#,
        br#"{"name": null, "id": null}"#,
        br#"{"name": "ls", "id": null, "id": "1"}"#,
        br#"{"name": "ls", "args": null, "context": null}"#,
        br#"{"name": "ls", "args": {"x": 1}, "args": "bad"}"#,
        br#"{"name": "ls", "context": {"a": 1}, "context": 5}"#,
        br#"{"name": "ls", "context": [1]}"#,
        br#"{"name": "ls", "context": {"authz_attributes": 3}}"#,
        br#"{"name": 7, "id": 42}"#,
        br#"{"name": true, "id": 1.5}"#,
        br#"{"name": ["a"], "id": "c1"}"#,
        br#"{"name": "ls", "id": {"a": 1}}"#,
        br#"{"name": "ls", "args": [1]}"#,
        br#"{"name": "ls", "x": 1e400}"#,
        br#"{"name": "ls", "args": {"x": 1e400}}"#,
        br#"{"name": "ls"} trailing"#,
        br#"  {"name": "ls"}  "#,
        br#"{"name": "ls",}"#,
        b"{\"name\": \"ls\xff\"}",
        b"\xef\xbb\xbf{\"name\": \"ls\"}",
        br#"{"name":"ls","args":{"s":"\ud800"}}"#,
        b"{}",
        b"",
        b"  ",
        b"[1]",
        b"null",
        b"{",
    ];
    for line in lines {
        assert_eq!(parse_line(4, line), parse_general(4, line), "{}", String::from_utf8_lossy(line));
    }
    let deep = format!(r#"{{"name":"ls","args":{{"d":{}{}}}}}"#, "[".repeat(200), "]".repeat(200));
    assert_eq!(parse_line(4, deep.as_bytes()), parse_general(4, deep.as_bytes()));
    assert!(parse_line(4, deep.as_bytes()).is_err());
}

#[test]
fn a_key_twice_anywhere_in_a_call_is_refused_naming_where() {
    for (line, path) in [
        (r#"{"name":"read_file","name":"bash"}"#, "name"),
        (r#"{"name":"bash","args":{"command":"sudo rm -rf /","command":"ls"}}"#, "args.command"),
        (r#"{"name":"ls","id":"a","id":"b"}"#, "id"),
        (r#"{"name":"ls","args":{"x":1},"args":{"y":2}}"#, "args"),
        (r#"{"name":"ls","args":{"opts":{"a":{"b":1,"b":2}}}}"#, "args.opts.a.b"),
        (r#"{"name":"ls","args":{"list":[{"k":1},{"k":1,"k":2}]}}"#, "args.list[1].k"),
        (r#"{"name":"ls","context":{"thread_id":"a","thread_id":"b"}}"#, "context.thread_id"),
        (r#"{"name":"ls","extra":{"z":[[{"q":0,"q":0}]]}}"#, "extra.z[0][0].q"),
        // The same text escaped another way is the same key.
        (r#"{"name":"ls","args":{"cmd":"a","cmd":"b"}}"#, "args.cmd"),
    ] {
        let error = parse_line(5, line.as_bytes()).unwrap_err();
        let expected = format!("guardhost: line 5: duplicate key `{path}` (column ");
        assert!(error.content.starts_with(&expected), "{line}: {}", error.content);
        assert!(error.content.contains("send each key once"), "{}", error.content);
        assert_eq!(parse_line(5, line.as_bytes()), parse_general(5, line.as_bytes()));
    }
    // The id is kept when it is there once, and not when it is the key
    // twice.
    let error = parse_line(1, br#"{"id":"c7","name":"ls","args":{"a":1,"a":2}}"#).unwrap_err();
    assert_eq!((error.tool_call_id.as_str(), error.name.as_deref()), ("c7", Some("ls")));
    let error = parse_line(1, br#"{"id":"c7","name":"ls","id":"c8"}"#).unwrap_err();
    assert_eq!((error.tool_call_id.as_str(), error.name.as_deref()), ("missing_id", Some("ls")));
    assert_eq!(unambiguous_id_and_name(br#"{"id":"c7","name":"a","name":"b"}"#), (Some("c7".into()), None));
    // Same keys in different objects, or in an object and its parent,
    // are fine.
    let call = parse_line(1, br#"{"name":"ls","args":{"name":"x","a":{"name":1},"b":[{"a":1},{"a":2}]}}"#);
    assert_eq!(call.unwrap().tool_call.args["b"][1]["a"], 2);
    // A long key is named, cut short.
    let key = "k".repeat(5000);
    let line = format!(r#"{{"name":"ls","args":{{"{key}":1,"{key}":2}}}}"#);
    let error = parse_line(1, line.as_bytes()).unwrap_err();
    assert!(error.content.len() < 400, "{}", error.content);
    assert!(error.content.contains(&format!("`args.{}...`", "k".repeat(64))), "{}", error.content);
}

#[test]
fn read_line_holds_at_most_the_limit_and_reads_every_line_after_a_long_one() {
    let long = format!(r#"{{"id":"big","name":"write_file","args":{{"content":"{}"}}}}"#, "x".repeat(10_000));
    let input = format!("{{\"name\":\"a\"}}\r\n{long}\r\n{}\n\n{long}", "y".repeat(100));
    // A reader that hands out a few bytes at a time.
    let mut reader = std::io::BufReader::with_capacity(7, input.as_bytes());
    let mut line = Vec::new();
    let mut read = || {
        let got = read_line(&mut reader, &mut line, 100).unwrap();
        (got, String::from_utf8_lossy(&line).into_owned())
    };
    assert_eq!(read(), (Some(Line::Whole), r#"{"name":"a"}"#.to_owned()));
    let (got, start) = read();
    assert_eq!(got, Some(Line::TooLong { length: long.len() as u64 + 1 }));
    assert!(start.len() <= 101 && long.starts_with(&start), "{start}");
    assert_eq!(too_long(2, 1, 100, start.as_bytes()).1.as_deref(), Some("big"));
    // Exactly the limit is a line; its `\r\n` is not counted.
    assert_eq!(read(), (Some(Line::Whole), "y".repeat(100)));
    assert_eq!(read(), (Some(Line::Whole), String::new()));
    // A last line without its `\n`, over the limit.
    assert_eq!(read().0, Some(Line::TooLong { length: long.len() as u64 }));
    assert_eq!(read().0, None);
    assert!(line.capacity() < 1000, "{}", line.capacity());
    // At the limit with `\r\n`, and one byte over it with `\r\n`.
    let input = format!("{}\r\n{}\r\nend", "z".repeat(100), "z".repeat(101));
    let mut reader = std::io::BufReader::with_capacity(3, input.as_bytes());
    assert_eq!(read_line(&mut reader, &mut line, 100).unwrap(), Some(Line::Whole));
    assert_eq!(line, "z".repeat(100).as_bytes());
    assert_eq!(read_line(&mut reader, &mut line, 100).unwrap(), Some(Line::TooLong { length: 102 }));
    assert_eq!(read_line(&mut reader, &mut line, 100).unwrap(), Some(Line::Whole));
    assert_eq!(line, b"end");
}

#[test]
fn a_long_lines_id_and_name_are_read_from_its_start_only_when_unambiguous() {
    for (start, expected) in [
        (r#"{"id":"c1","name":"bash","args":{"x":"aaaa"#, (Some("c1"), Some("bash"))),
        (r#"{"args":{"id":"no"},"name":"ls","id":"c2","args":"#, (Some("c2"), Some("ls"))),
        (r#"{"id":"c1","id":"c2","name":"ls""#, (None, None)),
        (r#"{"name":"ls","id":7,"args":"#, (None, Some("ls"))),
        (r#"{"args":{"command":"rm -rf /"#, (None, None)),
        (r#"[{"id":"c1"}"#, (None, None)),
    ] {
        let (message, id, name) = too_long(9, 5_000_000, 4096, start.as_bytes());
        assert_eq!((id.as_deref(), name.as_deref()), expected, "{start}");
        assert!(message
            .content
            .starts_with("guardhost: line 9: the line is 5000000 bytes, more than the 4096"));
        assert!(!message.content.contains("rm -rf"), "never echoed: {}", message.content);
    }
}

#[test]
fn parse_unique_reads_what_serde_json_reads() {
    for text in
        [r#"{"a":[1,-2,3.5,1e300,12345678901234567890,null,true,"s\u00e9"],"b":{}}"#, "[]", " 7 ", r#""x""#]
    {
        assert_eq!(parse_unique(text).unwrap(), serde_json::from_str::<Value>(text).unwrap(), "{text}");
    }
    for text in ["{", "[1,]", "1e400", "{} x", ""] {
        let NotUnique::Json(error) = parse_unique(text).unwrap_err() else { panic!("{text}") };
        assert_eq!(error.to_string(), serde_json::from_str::<Value>(text).unwrap_err().to_string());
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(matches!(parse_unique(&deep), Err(NotUnique::Json(_))));
    let NotUnique::Duplicate { path, at } = parse_unique("{\n\"a\": 1,\n\"a\": 2}").unwrap_err() else {
        panic!()
    };
    assert_eq!((path.as_str(), at.as_str()), ("a", "line 3 column 7"));
}

#[test]
fn a_context_that_is_not_a_mapping_is_read_as_empty() {
    for context in ["[1]", "\"text\"", "3", "true"] {
        let line = format!(r#"{{"name": "ls", "context": {context}}}"#);
        let call = parse_line(1, line.as_bytes()).unwrap();
        assert_eq!(call.context, Some(Map::new()), "{context}");
    }
    let call = parse_line(1, br#"{"name": "ls", "context": null}"#).unwrap();
    assert_eq!(call.context, None);
}
