//! The engine files of deploy/ and the Dockerfile, tested as far as a machine without a
//! cluster can: each parses; every capsize command in it names a subcommand and flags the
//! binary has; the shard count agrees with the engine's own (a Kubernetes Job's completions,
//! a Slurm array's size, a CI matrix's length); the merge reads where the shards write; and
//! the shard commands, run here with the variables each engine sets, make shards that merge
//! into the unsharded sweep, byte for byte. The image itself is built and run only where a
//! container runtime and a registry are at hand (`cargo test --test deploy -- --ignored`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

mod common;
use common::temp::Temp;
use common::{capsize, root, stderr};

fn read(rel: &str) -> String {
    std::fs::read_to_string(root(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Yaml {
    let mut docs = YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one document");
    docs.remove(0)
}

/// The long flags `capsize SUB --help` lists.
fn flags_of(sub: &str) -> Vec<String> {
    let o = capsize(&[sub, "--help"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "capsize {sub} --help: {}",
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| {
            w.trim_end_matches([',', '.'])
                .split('=')
                .next()
                .unwrap_or(w)
                .to_string()
        })
        .collect()
}

/// Asserts `args` (what follows `capsize`) is a subcommand of the binary with flags it has,
/// and returns them by flag (`--out` → its value), the positional arguments under "".
fn checked(args: &[String], file: &str) -> BTreeMap<String, Vec<String>> {
    let sub = &args[0];
    assert!(
        ["sweep", "merge"].contains(&sub.as_str()),
        "{file}: capsize {sub}?"
    );
    let known = flags_of(sub);
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        if let Some(flag) = a.strip_prefix("--") {
            let flag = format!("--{}", flag.split('=').next().unwrap_or(flag));
            assert!(known.contains(&flag), "{file}: capsize {sub} has no {flag}");
            let value = match a.split_once('=') {
                Some((_, v)) => v.to_string(),
                None => rest.next().cloned().unwrap_or_default(),
            };
            by.entry(flag).or_default().push(value);
        } else {
            by.entry(String::new()).or_default().push(a.clone());
        }
    }
    by
}

/// The one container of a Job and its args.
fn job_args(job: &Yaml, file: &str) -> Vec<String> {
    assert_eq!(job["kind"].as_str(), Some("Job"), "{file}");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"), "{file}");
    assert_eq!(
        pod["securityContext"]["runAsNonRoot"].as_bool(),
        Some(true),
        "{file}: non-root"
    );
    let containers = pod["containers"].as_vec().expect("containers");
    assert_eq!(containers.len(), 1, "{file}");
    containers[0]["args"]
        .as_vec()
        .expect("args")
        .iter()
        .map(|a| a.as_str().map(str::to_string).expect("args are strings"))
        .collect()
}

fn claim(job: &Yaml) -> Option<&str> {
    job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str()
}

/// Every file under `dir`, by relative path, with its bytes (shard folders left out).
fn outputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read a folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p.strip_prefix(dir).expect("under").to_path_buf(), bytes)
        })
        .collect();
    all.sort();
    all
}

/// Runs `args` (a capsize command of an engine file) here, the image's scenario path read from
/// the repository, the sweep shortened (`workload.duration_s=300`) and `/data` under `t`,
/// with `env` set as the engine sets it.
fn run_here(t: &Temp, args: &[String], env: &[(&str, String)]) {
    let data = t.path("data");
    let mut here: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("/opt/capsize/scenarios", &root("scenarios"))
                .replace("/data", &data.to_string_lossy())
        })
        .collect();
    if here[0] == "sweep" {
        here.extend(["--set".into(), "workload.duration_s=300".into()]);
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capsize"));
    cmd.args(&here);
    for var in [
        "JOB_COMPLETION_INDEX",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_COUNT",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let o = cmd.output().expect("capsize runs");
    assert_eq!(o.status.code(), Some(0), "{here:?}: {}", stderr(&o));
}

#[test]
fn the_kubernetes_jobs_shard_and_merge_as_the_binary_does() {
    let file = "deploy/kubernetes/sweep-shards.yaml";
    let job = yaml(file);
    assert_eq!(job["spec"]["completionMode"].as_str(), Some("Indexed"));
    let completions = job["spec"]["completions"].as_i64().expect("completions");
    let args = job_args(&job, file);
    let sweep = checked(&args, file);
    assert_eq!(
        sweep["--shards"],
        [completions.to_string()],
        "{file}: --shards is the Job's completions"
    );
    let merge_file = "deploy/kubernetes/merge.yaml";
    let merge_job = yaml(merge_file);
    let merge_args = job_args(&merge_job, merge_file);
    let merge = checked(&merge_args, merge_file);
    assert_eq!(
        merge[""], sweep["--out"],
        "the merge reads where the shards write"
    );
    let volume = yaml("deploy/kubernetes/volume.yaml");
    assert_eq!(volume["kind"].as_str(), Some("PersistentVolumeClaim"));
    assert_eq!(
        volume["spec"]["accessModes"][0].as_str(),
        Some("ReadWriteMany")
    );
    let name = volume["metadata"]["name"].as_str();
    assert_eq!(claim(&job), name);
    assert_eq!(claim(&merge_job), name);

    // Each pod as Kubernetes starts it: JOB_COMPLETION_INDEX from 0.
    let t = Temp::new("deploy", "kubernetes");
    for i in (0..completions).rev() {
        run_here(&t, &args, &[("JOB_COMPLETION_INDEX", i.to_string())]);
    }
    run_here(&t, &merge_args, &[]);
    let whole = t.path("whole");
    let o = capsize(&[
        "sweep",
        &root("scenarios/agent.toml"),
        "--set",
        "workload.duration_s=300",
        "--out",
        whole.to_str().expect("UTF-8"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(outputs(&t.path("data/agent")), outputs(&whole));
}

/// The capsize command of a batch script: the words of its `capsize ...` line, `$OUT`
/// replaced by `out`.
fn script_command(text: &str, out: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("capsize "))
        .expect("a capsize line");
    line.split_whitespace()
        .skip(1)
        .map(|w| w.trim_matches('"').replace("$OUT", out))
        .collect()
}

#[test]
fn the_slurm_array_shards_by_its_size_and_merges_where_it_wrote() {
    let text = read("deploy/slurm/sweep.sbatch");
    let array = text
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --array="))
        .expect("an --array");
    let (min, max) = array.split_once('-').expect("a range");
    let (min, max): (u32, u32) = (min.parse().expect("min"), max.parse().expect("max"));
    let t = Temp::new("deploy", "slurm");
    let out = t.path("out").to_string_lossy().into_owned();
    let mut sweep = script_command(&text, &out);
    let cpus = "$SLURM_CPUS_PER_TASK";
    assert!(sweep.iter().any(|w| w == cpus), "{sweep:?}");
    sweep = sweep
        .into_iter()
        .map(|w| if w == cpus { "2".into() } else { w })
        .collect();
    let flags = checked(&sweep, "sweep.sbatch");
    assert!(!flags.contains_key("--shard"), "the array says the shard");
    let merge = script_command(&read("deploy/slurm/merge.sbatch"), &out);
    assert_eq!(checked(&merge, "merge.sbatch")[""], vec![out.clone()]);

    sweep[1] = root(&sweep[1]);
    for id in min..=max {
        run_here(
            &t,
            &sweep,
            &[
                ("SLURM_ARRAY_TASK_ID", id.to_string()),
                ("SLURM_ARRAY_TASK_MIN", min.to_string()),
                ("SLURM_ARRAY_TASK_COUNT", (max - min + 1).to_string()),
            ],
        );
    }
    let shards = std::fs::read_dir(&out).expect("out").count();
    assert_eq!(shards as u32, max - min + 1, "one folder per task");
    run_here(&t, &merge, &[]);
    assert!(Path::new(&out).join("report.md").is_file());
}

#[test]
fn the_ci_matrix_runs_each_shard_once() {
    let file = "deploy/ci/github-actions.yml";
    let doc = yaml(file);
    let shards: Vec<i64> = doc["jobs"]["shard"]["strategy"]["matrix"]["shard"]
        .as_vec()
        .expect("a shard matrix")
        .iter()
        .map(|v| v.as_i64().expect("numbers"))
        .collect();
    let n = shards.len() as i64;
    assert_eq!(
        shards,
        (1..=n).collect::<Vec<_>>(),
        "{file}: 1 to N, each once"
    );
    let run_of = |job: &str| -> Vec<Vec<String>> {
        doc["jobs"][job]["steps"]
            .as_vec()
            .expect("steps")
            .iter()
            .filter_map(|s| s["run"].as_str())
            .filter_map(|r| r.strip_prefix("capsize "))
            .map(|r| {
                r.replace("${{ matrix.shard }}", "MATRIX_SHARD")
                    .split_whitespace()
                    .map(str::to_string)
                    .collect()
            })
            .collect()
    };
    let sweep = &run_of("shard")[0];
    let flags = checked(sweep, file);
    assert_eq!(
        flags["--shard"],
        [format!("MATRIX_SHARD/{n}")],
        "the matrix's shard of N"
    );
    let merge = &run_of("merge")[0];
    assert_eq!(checked(merge, file)[""], flags["--out"]);
    assert_eq!(
        doc["jobs"]["merge"]["needs"].as_str(),
        Some("shard"),
        "the merge waits for every shard"
    );
}

#[test]
fn the_dockerfile_builds_the_binary_in_one_stage_and_runs_it_as_a_user_in_another() {
    let text = read("Dockerfile");
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(froms[0].ends_with(" AS build"), "{froms:?}");
    assert!(froms[1].contains("slim"), "a slim base: {froms:?}");
    let build = lines
        .iter()
        .find(|l| l.starts_with("RUN cargo build"))
        .expect("a build");
    assert!(
        build.contains("--release") && build.contains("--bin capsize"),
        "{build}"
    );
    let copy = lines
        .iter()
        .find(|l| l.starts_with("COPY --from=build"))
        .expect("the binary copied from the build stage");
    let installed = copy.split_whitespace().last().expect("a target");
    let last = |word: &str| {
        lines
            .iter()
            .rev()
            .find(|l| l.starts_with(word))
            .unwrap_or_else(|| panic!("{word}"))
            .to_string()
    };
    assert_eq!(last("ENTRYPOINT"), format!("ENTRYPOINT [\"{installed}\"]"));
    assert_eq!(last("CMD"), "CMD [\"--help\"]");
    let user = last("USER");
    assert!(
        !user.contains("root") && !user.contains(" 0"),
        "non-root: {user}"
    );
    // The image's scenarios are the repository's: the Kubernetes Job's scenario is there.
    assert!(lines.contains(&"COPY scenarios /opt/capsize/scenarios"));
    assert!(Path::new(&root("scenarios/agent.toml")).is_file());
    let ignored = read(".dockerignore");
    assert!(
        ignored.lines().any(|l| l.trim() == "target/"),
        "the build context leaves target/ out"
    );
}

/// Builds the image and runs it with no arguments: its entrypoint is the binary's `--help`.
/// Needs a container runtime (docker or podman) and access to Docker Hub's rust and debian
/// images.
#[test]
#[ignore = "needs a container runtime and a registry: cargo test --test deploy -- --ignored"]
fn the_image_runs_the_binary_and_says_its_help() {
    let runtime = ["docker", "podman"]
        .into_iter()
        .find(|r| {
            Command::new(r)
                .arg("info")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("a container runtime that answers `info`");
    let tag = "capsize:deploy-test";
    let built = Command::new(runtime)
        .args(["build", "-t", tag, &root(".")])
        .status()
        .expect("build runs");
    assert!(built.success(), "{runtime} build");
    let o = Command::new(runtime)
        .args(["run", "--rm", tag])
        .output()
        .expect("run runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let help = capsize(&["--help"]);
    assert_eq!(o.stdout, help.stdout);
}
