//! Splitting a shell line into words.
//!
//! Rules: words are separated by whitespace; `'...'` is taken literally;
//! inside `"..."` the escapes `\"`, `\\`, `\n`, `\t` and `\r` are
//! understood (any other escape is an error); outside quotes `\` takes the
//! next character literally (`\ ` is a space); quoted and unquoted pieces
//! next to each other form one word, and `""` is an empty word; `#` at the
//! start of a word begins a comment running to the end of the line.
//!
//! Invariants: never panics; an unterminated quote or a trailing backslash
//! is an error, never a silently shortened word.

/// The words of `line`.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => return Ok(words),
            Some(_) => {}
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated single quote".into()),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.push(match chars.next() {
                            Some('"') => '"',
                            Some('\\') => '\\',
                            Some('n') => '\n',
                            Some('t') => '\t',
                            Some('r') => '\r',
                            Some(other) => {
                                return Err(format!(
                                    "unknown escape \\{other} in double quotes \
                                     (known: \\\" \\\\ \\n \\t \\r)"
                                ))
                            }
                            None => return Err("unterminated double quote".into()),
                        }),
                        Some(c) => word.push(c),
                        None => return Err("unterminated double quote".into()),
                    }
                },
                '\\' => match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("backslash at the end of the line".into()),
                },
                c => word.push(c),
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn examples() {
        assert_eq!(ok("  put  k   v "), ["put", "k", "v"]);
        assert_eq!(ok(""), Vec::<String>::new());
        assert_eq!(ok("# a comment"), Vec::<String>::new());
        assert_eq!(ok("get k # trailing"), ["get", "k"]);
        assert_eq!(ok("get a#b"), ["get", "a#b"]);
        assert_eq!(
            ok("put 'my key' \"my value\""),
            ["put", "my key", "my value"]
        );
        assert_eq!(ok("put \"\" ''"), ["put", "", ""]);
        assert_eq!(
            ok(r#"put "a\"b\\c\nd\te" x"#),
            ["put", "a\"b\\c\nd\te", "x"]
        );
        assert_eq!(ok(r"put a\ b c\'d"), ["put", "a b", "c'd"]);
        assert_eq!(ok(r#"put 'it'"'"'s' ok"#), ["put", "it's", "ok"]);
        assert_eq!(ok("put pre'fix'\"post\" v"), ["put", "prefixpost", "v"]);
        assert_eq!(ok("put 'a\\nb' v"), ["put", "a\\nb", "v"]);
        assert_eq!(ok("put 日本 ✓"), ["put", "日本", "✓"]);
    }

    #[test]
    fn errors() {
        assert!(split("put 'abc").unwrap_err().contains("single quote"));
        assert!(split("put \"abc").unwrap_err().contains("double quote"));
        assert!(split("put \"abc\\").unwrap_err().contains("double quote"));
        assert!(split("put abc\\").unwrap_err().contains("backslash"));
        assert!(split(r#"put "\q""#).unwrap_err().contains("unknown escape"));
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC*") {
            let _ = split(&line);
        }

        #[test]
        fn single_quoted_words_survive(words in proptest::collection::vec("[^']*", 0..5)) {
            let line: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
            prop_assert_eq!(split(&line.join(" ")).unwrap(), words);
        }
    }
}
