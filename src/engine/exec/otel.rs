//! Where the agent's OpenTelemetry SDK sends its traces: to the mock, whatever the user's
//! environment says. The SDKs read a signal's own variable before the general one
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` over `OTEL_EXPORTER_OTLP_ENDPOINT`), so setting only
//! the general one would let a user's traces endpoint (a production collector, say) take the
//! spans away, silently. Both are set, and both protocols; a compression the mock does not
//! read (it reads `gzip` and `deflate`) is turned off. The user's variables replaced are named,
//! so that exec can say so.

/// The OTLP protocol the mock reads at `/v1/traces`.
const PROTOCOL: &str = "http/protobuf";

/// The compressions the mock's trace route inflates (and `none`).
const READ_COMPRESSIONS: [&str; 3] = ["none", "gzip", "deflate"];

/// The variables to set for an agent whose traces go to the mock at `uri` (`http://HOST:PORT`),
/// given the user's environment `user`; and the names of the user's variables they replace
/// with another value.
pub(super) fn otel_env(
    uri: &str,
    user: &dyn Fn(&str) -> Option<String>,
) -> (Vec<(&'static str, String)>, Vec<&'static str>) {
    let mut set = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", uri.to_string()),
        // A signal's own endpoint is used as it is: the whole URL of the route.
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{uri}/v1/traces"),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", PROTOCOL.to_string()),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", PROTOCOL.to_string()),
    ];
    for name in [
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    ] {
        let unread = user(name).is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            !v.is_empty() && !READ_COMPRESSIONS.contains(&v.as_str())
        });
        if unread {
            set.push((name, "none".to_string()));
        }
    }
    let replaced = set
        .iter()
        .filter(|(name, value)| user(name).is_some_and(|v| v.trim() != value))
        .map(|(name, _)| *name)
        .collect();
    (set, replaced)
}

/// The user's variables (of this process's environment) that an agent's traces going to a mock
/// started here replace: what `capsize exec` says it overrode.
pub fn overridden() -> Vec<&'static str> {
    otel_env("http://127.0.0.1:0", &environment).1
}

/// A variable of this process's environment, if set (to anything but nothing).
pub(super) fn environment(name: &str) -> Option<String> {
    std::env::var_os(name)
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn every_traces_variable_points_at_the_mock() {
        let (set, replaced) = otel_env("http://127.0.0.1:9", &env_of(&[]));
        assert_eq!(
            set,
            [
                (
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "http://127.0.0.1:9".to_string()
                ),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://127.0.0.1:9/v1/traces".to_string()
                ),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_string()),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                    "http/protobuf".to_string()
                ),
            ]
        );
        assert!(replaced.is_empty());
    }

    #[test]
    fn the_users_variables_replaced_are_named_and_only_those() {
        let user = [
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://collector.example:4318/v1/traces",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd"),
        ];
        let (set, replaced) = otel_env("http://127.0.0.1:9", &env_of(&user));
        // gzip is read: left as the user set it; zstd is not: turned off.
        assert_eq!(
            set.last(),
            Some(&("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none".to_string()))
        );
        assert!(!set
            .iter()
            .any(|(n, _)| *n == "OTEL_EXPORTER_OTLP_COMPRESSION"));
        assert_eq!(
            replaced,
            [
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
            ]
        );
    }
}
