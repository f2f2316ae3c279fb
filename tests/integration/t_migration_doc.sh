#!/bin/bash
# SPDX-License-Identifier: MIT
#
# docs/MIGRATION.md's Kubernetes manifest is a valid Indexed Job, as far as
# the fields it uses go: batch/v1 Job with only known Job and pod fields,
# completionMode Indexed, completions equal to the --shards of its command,
# parallelism no more than completions, restartPolicy Never (which
# backoffLimitPerIndex needs), every volumeMount naming a volume; its
# container's command is one rdmacp accepts (`... --help` exits 0) and runs
# a shard with --shard auto (taking JOB_COMPLETION_INDEX). The same for the
# rdmacp command lines of its Slurm and MPI sections.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed"
DOC=$SRC_DIR/docs/MIGRATION.md
[ -f "$DOC" ] || die "no $DOC"

python3 - "$DOC" "$RDMACP" <<'PY' >"$T/check.out" 2>&1
import re, subprocess, sys, yaml

doc, rdmacp = sys.argv[1], sys.argv[2]
text = open(doc).read()
blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
bad = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        bad.append(what)

check(len(blocks) == 1, "one yaml block")
job = yaml.safe_load(blocks[0])
JOB_KEYS = {"apiVersion", "kind", "metadata", "spec"}
SPEC_KEYS = {"completionMode", "completions", "parallelism", "backoffLimit",
             "backoffLimitPerIndex", "maxFailedIndexes", "template", "activeDeadlineSeconds",
             "ttlSecondsAfterFinished", "podFailurePolicy", "suspend", "selector",
             "manualSelector", "podReplacementPolicy"}
POD_KEYS = {"restartPolicy", "containers", "volumes", "nodeSelector", "affinity",
            "tolerations", "serviceAccountName", "securityContext", "hostNetwork"}
CONTAINER_KEYS = {"name", "image", "command", "args", "env", "volumeMounts", "resources",
                  "securityContext", "workingDir"}
VOLUME_SOURCES = {"persistentVolumeClaim", "secret", "configMap", "hostPath", "emptyDir", "nfs"}
check(set(job) <= JOB_KEYS and job["apiVersion"] == "batch/v1" and job["kind"] == "Job",
      "a batch/v1 Job with known top-level fields")
spec = job["spec"]
check(set(spec) <= SPEC_KEYS, "known Job spec fields: %s" % sorted(set(spec) - SPEC_KEYS))
check(spec.get("completionMode") == "Indexed", "completionMode: Indexed")
n = spec.get("completions")
check(isinstance(n, int) and n >= 1, "completions is a count")
check(isinstance(spec.get("parallelism"), int) and 1 <= spec["parallelism"] <= n,
      "parallelism between 1 and completions")
for k in ("backoffLimitPerIndex", "maxFailedIndexes"):
    check(k not in spec or (isinstance(spec[k], int) and spec[k] >= 0), k + " is a count")
pod = spec["template"]["spec"]
check(set(pod) <= POD_KEYS, "known pod fields: %s" % sorted(set(pod) - POD_KEYS))
check(pod.get("restartPolicy") == "Never", "restartPolicy Never (backoffLimitPerIndex needs it)")
vols = {}
for v in pod.get("volumes", []):
    src = set(v) - {"name"}
    check(len(src) == 1 and src <= VOLUME_SOURCES, "volume %s has one known source" % v.get("name"))
    vols[v["name"]] = v
for c in pod["containers"]:
    check(set(c) <= CONTAINER_KEYS, "known container fields: %s" % sorted(set(c) - CONTAINER_KEYS))
    for m in c.get("volumeMounts", []):
        check(m["name"] in vols and m["mountPath"].startswith("/"),
              "volumeMount %s names a volume" % m["name"])
    cmd = c["command"] + c.get("args", [])
    check(cmd[0] == "rdmacp" and "run" in cmd, "the container runs rdmacp run")
    check("--shard" in cmd and cmd[cmd.index("--shard") + 1] == "auto", "with --shard auto")
    check("--shards" in cmd and int(cmd[cmd.index("--shards") + 1]) == n,
          "its --shards is the completions (%d)" % n)
    r = subprocess.run([rdmacp] + cmd[1:] + ["--help"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    check(r.returncode == 0, "rdmacp accepts the container's command: %s" % r.stderr[:200])

# The rdmacp lines of the other sections take options rdmacp knows.
lines = [l.strip() for l in text.splitlines()
         if re.match(r"\s+(exec |mpirun .* )?rdmacp ", l)]
for l in lines:
    args = l.split()
    args = args[args.index("rdmacp") + 1:]
    args = [a.strip("'") for a in args if a not in (">", "data.csv")]
    if ">" in l:
        args = args[:args.index(">")] if ">" in args else args
    r = subprocess.run([rdmacp] + args + ["--help"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    check(r.returncode == 0, "rdmacp accepts: %s" % l)
sys.exit(1 if bad else 0)
PY
rc=$?
cat "$T/check.out"
[ "$rc" -eq 0 ] || FAILS=$((FAILS + 1))
finish
