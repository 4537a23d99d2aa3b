//! A Redis URL as it may be shown: without its password.

/// `url` with its password replaced by `***`, so it can go into an error message or a log:
/// `redis://user:secret@host:6379/0` becomes `redis://user:***@host:6379/0`,
/// `redis://:secret@host` becomes `redis://:***@host`. A user name alone
/// (`redis://name@host`, where some clients take the password) is hidden too
/// (`redis://***@host`), and so is the value of a `pass` or `password` query parameter
/// (`redis+unix:///run/redis.sock?pass=secret`). What is not recognised is hidden rather
/// than shown: the user information ends at the last `@`, whatever follows it.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let rest = match rest.rfind('@') {
        Some(at) => {
            let (user, after) = (&rest[..at], &rest[at..]);
            match user.find(':') {
                Some(colon) => format!("{}:***{after}", &user[..colon]),
                None => format!("***{after}"),
            }
        }
        None => rest.to_owned(),
    };
    let Some(q) = rest.find('?') else {
        return format!("{scheme}{rest}");
    };
    let (head, query) = rest.split_at(q + 1);
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _))
                if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
            {
                format!("{k}=***")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{scheme}{head}{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn the_password_never_shows() {
        let cases = [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://u:secret@h:6379/2", "redis://u:***@h:6379/2"),
            ("rediss://:secret@h", "rediss://:***@h"),
            ("redis://secret@h", "redis://***@h"),
            ("redis://u:p@ss:w@rd@h/0", "redis://u:***@h/0"),
            ("redis://u:a/b@h", "redis://u:***@h"),
            (
                "redis+unix:///tmp/r.sock?db=1&pass=secret",
                "redis+unix:///tmp/r.sock?db=1&pass=***",
            ),
            ("redis://h/0?password=secret", "redis://h/0?password=***"),
            ("u:secret@h:1", "u:***@h:1"),
            ("http://x", "http://x"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
            assert!(!redact_url(url).contains("secret"), "{url}");
        }
    }
}
