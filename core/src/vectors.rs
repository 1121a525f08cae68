//! The golden vector files' reader, for tests only: the subset of JSON those files use (read
//! without a JSON crate, since the core has no dependencies) and their hex strings.

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub(crate) fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(kv) => kv
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("missing key {key}")),
            _ => panic!("not an object looking up {key}"),
        }
    }
    /// The value of `key`, if this object has it.
    pub(crate) fn opt(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => panic!("not an object looking up {key}"),
        }
    }
    pub(crate) fn num(&self) -> f64 {
        match self {
            Json::Num(n) => *n,
            Json::Str(s) if s == "NaN" => f64::NAN,
            Json::Str(s) if s == "Infinity" => f64::INFINITY,
            Json::Str(s) if s == "-Infinity" => f64::NEG_INFINITY,
            other => panic!("not a number: {other:?}"),
        }
    }
    pub(crate) fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }
    pub(crate) fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// Reads the subset of JSON the vector file uses (no \u escapes).
pub(crate) struct JsonReader<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonReader<'_> {
    pub(crate) fn parse(text: &str) -> Json {
        let mut r = JsonReader {
            s: text.as_bytes(),
            i: 0,
        };
        let v = r.value();
        r.ws();
        assert_eq!(r.i, r.s.len(), "trailing characters in JSON");
        v
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) {
        self.ws();
        assert_eq!(self.s[self.i], c, "expected '{}' at {}", c as char, self.i);
        self.i += 1;
    }
    /// The items of an object or array, from its opening character to `close`, each read by
    /// `item`; the separators are skipped.
    fn items(&mut self, close: u8, mut item: impl FnMut(&mut Self)) {
        self.i += 1;
        self.ws();
        if self.s[self.i] == close {
            self.i += 1;
            return;
        }
        loop {
            item(self);
            self.ws();
            self.i += 1;
            if self.s[self.i - 1] == close {
                return;
            }
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        match self.s[self.i] {
            b'{' => {
                let mut kv = Vec::new();
                self.items(b'}', |r| {
                    r.ws();
                    let Json::Str(k) = r.value() else {
                        panic!("object key is not a string")
                    };
                    r.eat(b':');
                    kv.push((k, r.value()));
                });
                Json::Obj(kv)
            }
            b'[' => {
                let mut a = Vec::new();
                self.items(b']', |r| a.push(r.value()));
                Json::Arr(a)
            }
            b'"' => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    let c = self.s[self.i];
                    self.i += 1;
                    match c {
                        b'"' => return Json::Str(out),
                        b'\\' => {
                            let e = self.s[self.i];
                            self.i += 1;
                            out.push(match e {
                                b'n' => '\n',
                                b't' => '\t',
                                other => other as char,
                            });
                        }
                        _ => out.push(c as char),
                    }
                }
            }
            b'n' => {
                self.i += 4;
                Json::Null
            }
            b't' => {
                self.i += 4;
                Json::Bool(true)
            }
            b'f' => {
                self.i += 5;
                Json::Bool(false)
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.i += 1;
                }
                let text = core::str::from_utf8(&self.s[start..self.i]).expect("ascii");
                Json::Num(text.parse().unwrap_or_else(|_| panic!("bad number {text}")))
            }
        }
    }
}

/// The bytes of a hex string (two digits a byte).
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex digit"))
        .collect()
}

/// Checks that each vector of `list` (`name`, `hex`, `error`) is refused with the error it names;
/// `error_of` gives the name of the error its parser returns, if any.
pub(crate) fn assert_refused(list: &[Json], error_of: impl Fn(&[u8]) -> Option<&'static str>) {
    for v in list {
        let name = v.get("name").str();
        let got = error_of(&unhex(v.get("hex").str()));
        assert_eq!(got, Some(v.get("error").str()), "{name}");
    }
}
