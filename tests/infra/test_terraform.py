"""Static checks of the terraform/ module: HCL parses, inputs and outputs are documented, the
IAM policies say exactly what they should, checkov finds nothing, and (where a terraform binary
and the AWS provider are installed locally) `terraform validate` and the module's mocked
`terraform test` pass."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import zipfile

import pytest

from conftest import REPO, TERRAFORM, find_tool
from terraform_module import MODULE_FILES, TF_FILES, _parse, blocks, module_locals, one, parse, resources


# The checks skipped in the .tf files (each with its reason next to the resource). A new skip
# must be added here on purpose.
ALLOWED_SKIPS = {
    "CKV_AWS_117",  # Lambda outside a VPC: it calls only public AWS APIs
    "CKV_AWS_272",  # Lambda code signing: the package is built by the deployer, pinned by hash
    "CKV_AWS_338",  # log retention under a year: a variable, default 30 days
}

REQUIRED_OUTPUTS = {
    "cluster_instance_policy_arn", "sns_topic_arn", "lambda_function_name", "dashboard_name",
    "job_log_group_name", "job_report_reader_policy_arn", "alarm_prefix",
}


# --- parsing ---------------------------------------------------------------------------------


def test_tf_files_found():
    assert TERRAFORM / "versions.tf" in TF_FILES
    assert TERRAFORM / "examples" / "basic" / "main.tf" in TF_FILES


@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_tf_file_parses(path):
    try:
        _parse.__wrapped__(path)
    except Exception as e:  # python-hcl2 raises lark's exceptions
        pytest.fail(f"{path.relative_to(REPO)}: HCL parse error: {e}")


def test_versions():
    """The module and its example admit hashicorp/aws 5.x and 6.x."""
    for path in (TERRAFORM / "versions.tf", TERRAFORM / "examples" / "basic" / "main.tf"):
        tf = one(parse(path)["terraform"])
        assert tf["required_version"] == ">= 1.5"
        aws = one(tf["required_providers"])["aws"]
        assert aws == {"source": "hashicorp/aws", "version": ">= 5.0, < 7.0"}, path


# Attributes that hashicorp/aws 6.x deprecates or removes, or that 5.x lacks, as the module
# would reference them. Without a 6.x provider here (nothing is downloaded) this is the check that
# the module keeps to what both majors accept; test_terraform_validate_and_mocked_tests validates
# against the 5.x schema where that provider is installed.
NOT_IN_BOTH_MAJORS = {
    r"data\.aws_region\.[a-z_]+\.name\b": "deprecated in 6.x: use .id (the region's name in 5.x and 6.x)",
    r"data\.aws_region\.[a-z_]+\.region\b": "only in 6.x: use .id",
    r"\bis_enabled\s*=": "aws_cloudwatch_event_rule.is_enabled: deprecated, use state",
    r"\binline_policy\b": "aws_iam_role.inline_policy: deprecated, use aws_iam_role_policy",
    r"\bmanaged_policy_arns\b": "aws_iam_role.managed_policy_arns: deprecated, use attachments",
}


@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_nothing_deprecated_in_provider_5_or_6(path):
    text = "\n".join(l for l in path.read_text().splitlines() if not l.lstrip().startswith("#"))
    for pattern, why in NOT_IN_BOTH_MAJORS.items():
        m = re.search(pattern, text)
        assert not m, f"{path.relative_to(REPO)}: {m.group(0)!r}: {why}"


# --- inputs and outputs ----------------------------------------------------------------------


def test_every_variable_has_description_and_type():
    for files in (MODULE_FILES, [TERRAFORM / "examples" / "basic" / "main.tf"]):
        for name, body in blocks("variable", files).items():
            assert str(body.get("description", "")).strip(), f"variable {name} has no description"
            assert "type" in body, f"variable {name} has no type"


def test_variable_defaults():
    v = blocks("variable")
    assert v["lambda_memory_size"]["default"] == 256
    assert v["lambda_timeout"]["default"] == 60
    assert v["log_retention_days"]["default"] == 30
    assert v["every_minutes"]["default"] == 5
    assert v["event_bus_name"]["default"] == "default"
    assert v["namespace"]["default"] is None  # the cluster's own: local.namespace
    assert v["alarm_rules"]["default"] is None
    assert v["lambda_reserved_concurrency"]["default"] is None
    assert v["job_log_retention_days"]["default"] == 30
    assert v["create_instance_profile"]["default"] is False  # no node role unless asked, as before
    assert v["instance_profile_path"]["default"] == "/" and v["instance_role_policy_arns"]["default"] == []
    assert v["otlp_metrics"]["default"] is False and v["otlp_metrics"]["type"] == "bool"
    assert "default" not in v["cluster_name"] and "default" not in v["lambda_zip_path"]
    thresholds = v["thresholds"]["type"]
    for key, default in {
        "idle_gpu_percent": 5,
        "idle_gpu_minutes": 30,
        "low_cpu_efficiency_percent": 20,
        "low_cpu_minutes": 60,
        "memory_over_requested_percent": 25,
        "backlog_change_nodes": 1,
    }.items():
        assert re.search(rf"\b{key}\s*=\s*optional\(number,\s*{default}\)", thresholds), f"thresholds.{key} must default to {default}"


def test_required_outputs_exist_and_are_described():
    outputs = blocks("output")
    missing = REQUIRED_OUTPUTS - outputs.keys()
    assert not missing, f"missing outputs: {sorted(missing)}"
    for name, body in outputs.items():
        assert str(body.get("description", "")).strip(), f"output {name} has no description"
    assert outputs["cluster_instance_policy_arn"]["value"] == "${aws_iam_policy.cluster_instance.arn}"


# --- the Lambda and what is around it ---------------------------------------------------------


def test_lambda_function():
    res = resources()
    fn = res[("aws_lambda_function", "this")]
    assert fn["runtime"] == "provided.al2023"
    assert fn["handler"] == "bootstrap"
    assert fn["architectures"] == ["x86_64"]
    assert fn["filename"] == "${var.lambda_zip_path}"
    assert fn["source_code_hash"] == "${filebase64sha256(var.lambda_zip_path)}"
    assert fn["memory_size"] == "${var.lambda_memory_size}"
    assert fn["timeout"] == "${var.lambda_timeout}"
    # Unset unless asked for: any reservation fails on accounts with a concurrency quota of 10.
    assert fn["reserved_concurrent_executions"] == "${var.lambda_reserved_concurrency}"
    assert one(fn["tracing_config"])["mode"] == "Active"
    assert one(fn["dead_letter_config"])["target_arn"] == "${aws_sqs_queue.dlq.arn}"
    assert one(fn["environment"])["variables"] == {"SLURM_CW_LAMBDA_CONFIG": "${local.lambda_config}"}

    config = module_locals()["lambda_config"]
    for key, value in {
        "namespace": "local.namespace",
        "cluster_name": "var.cluster_name",
        "alarm_prefix": "local.alarm_prefix",
        "sns_topic_arn": "aws_sns_topic.alarms.arn",
        "event_bus": "var.event_bus_name",
        "rules": "local.alarm_rules",
        "thresholds": "var.thresholds",
        "job_log_group": "aws_cloudwatch_log_group.jobs.name",
        "pcs_scaling_log_group": "var.pcs_scaling_log_group",
        "pcs_cluster_id": "var.pcs_cluster_id",
    }.items():
        assert re.search(rf"\b{key}\s*=\s*{re.escape(value)}\b", config), f"lambda_config lacks {key} = {value}: {config}"
    rules = module_locals()["alarm_rules"]
    assert "var.alarm_rules" in rules and 'file("${path.module}/rules/default-rules.json")' in rules

    log_group = res[("aws_cloudwatch_log_group", "lambda")]
    assert log_group["name"] == "${local.log_group}"
    assert module_locals()["log_group"] == "/aws/lambda/${local.function_name}"
    assert log_group["retention_in_days"] == "${var.log_retention_days}"
    assert log_group["kms_key_id"] == "${aws_kms_key.this.arn}"


# Each input meant for the function, and where it must show: the function's own arguments, or
# its one environment variable (SLURM_CW_LAMBDA_CONFIG = local.lambda_config).
FUNCTION_INPUTS = {
    "cluster_name": "config",
    "namespace": "config",
    "event_bus_name": "config",
    "alarm_rules": "config",  # through local.alarm_rules
    "thresholds": "config",
    "account_budgets": "config",
    "function_name": "function",  # through local.function_name
    "lambda_zip_path": "function",
    "lambda_memory_size": "function",
    "lambda_timeout": "function",
    "lambda_reserved_concurrency": "function",
    "pcs_scaling_log_group": "config",
    "pcs_cluster_id": "config",
    "every_minutes": "config",  # and the schedule
    "shipper_flush_minutes": "config",
}
# Inputs that are not the function's settings.
OTHER_INPUTS = {
    "log_retention_days", "job_log_retention_days", "emf_log_retention_days", "alarm_emails",
    "kms_key_deletion_window_in_days", "role_permissions_boundary", "iam_path", "tags",
    "pcs_jobcomp_log_group", "create_instance_profile", "instance_profile_path", "instance_role_policy_arns",
    "otlp_metrics", "job_cost_price_lookup",
}


def uses(text: str, name: str, loc: dict, seen=()) -> bool:
    """`text` refers to var.<name>, directly or through locals."""
    if re.search(rf"\bvar\.{name}\b", text):
        return True
    for local in set(re.findall(r"\blocal\.([a-z_0-9]+)", text)) - set(seen):
        if local in loc and uses(str(loc[local]), name, loc, (*seen, local)):
            return True
    return False


def test_every_function_setting_reaches_the_function():
    variables = set(blocks("variable"))
    assert variables == set(FUNCTION_INPUTS) | OTHER_INPUTS, (
        f"classify the new inputs in FUNCTION_INPUTS or OTHER_INPUTS: {sorted(variables ^ (set(FUNCTION_INPUTS) | OTHER_INPUTS))}"
    )
    # Any lambda_* input is the function's.
    assert {v for v in variables if v.startswith("lambda_")} <= set(FUNCTION_INPUTS)
    loc = module_locals()
    fn = dict(resources()[("aws_lambda_function", "this")])
    fn.pop("environment")
    for name, where in FUNCTION_INPUTS.items():
        if where == "config":
            assert uses(loc["lambda_config"], name, loc), f"var.{name} does not reach SLURM_CW_LAMBDA_CONFIG"
        else:
            assert uses(json.dumps(fn), name, loc), f"var.{name} does not reach aws_lambda_function.this"


def test_default_lambda_config_fits_the_environment():
    """Lambda allows 4 KB of environment variables; the module's precondition stops at 3800
    bytes of SLURM_CW_LAMBDA_CONFIG. Measured as terraform's jsonencode writes it (compact,
    with <, > and & escaped) with the default rules and a long topic ARN."""
    rules = json.loads((TERRAFORM / "rules" / "default-rules.json").read_text())
    config = {
        "namespace": "Slurm/" + "c" * 40,
        "cluster_name": "c" * 40,
        "alarm_prefix": "slurm-cw-" + "c" * 40 + "/",
        "sns_topic_arn": "arn:aws-us-gov:sns:us-gov-west-1:123456789012:slurm-cw-" + "c" * 40 + "-alarms",
        "event_bus": "default",
        "rules": rules,
        "job_log_group": "/slurm-cw/" + "c" * 40 + "/jobs",
        "pcs_scaling_log_group": "/aws/vendedlogs/pcs/cluster/PCS_SCALING_LOGS/pcs_abcdefghij",
        "pcs_cluster_id": "pcs_abcdefghij",
        "thresholds": {"idle_gpu_percent": 5, "idle_gpu_minutes": 30, "low_cpu_efficiency_percent": 20,
                       "low_cpu_minutes": 60, "memory_over_requested_percent": 25, "backlog_change_nodes": 1},
    }
    text = json.dumps(config, separators=(",", ":"))
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(c, esc)
    print(f"SLURM_CW_LAMBDA_CONFIG with the default rules: {len(text)} of 3800 bytes")
    assert len(text) <= 3800, (
        f"the default rules make SLURM_CW_LAMBDA_CONFIG {len(text)} bytes: over the module's 3800-byte "
        "limit (Lambda allows 4 KB of environment); ship the rules in the package instead"
    )


def test_schedule_and_permission():
    res = resources()
    assert "var.every_minutes" in res[("aws_cloudwatch_event_rule", "schedule")]["schedule_expression"]
    assert res[("aws_cloudwatch_event_target", "lambda")]["arn"] == "${aws_lambda_function.this.arn}"
    perm = res[("aws_lambda_permission", "schedule")]
    assert perm["principal"] == "events.amazonaws.com"
    assert perm["action"] == "lambda:InvokeFunction"
    assert perm["source_arn"] == "${aws_cloudwatch_event_rule.schedule.arn}"


def test_dashboard_uses_the_templates():
    dash = resources()[("aws_cloudwatch_dashboard", "cluster")]
    assert dash["dashboard_body"] == "${jsonencode(merge(local.dashboard, {widgets = local.dashboard_widgets}))}"
    loc = module_locals()
    body = re.sub(r"\s+", " ", loc["dashboard"])
    assert 'templatefile("${path.module}/dashboards/cluster.json.tftpl"' in body
    for var in ("cluster_name = var.cluster_name", "namespace = local.namespace", "region = local.region",
                "job_log_group = aws_cloudwatch_log_group.jobs.name"):
        assert var in body, body
    pcs = re.sub(r"\s+", " ", loc["pcs_widgets"])
    assert 'templatefile("${path.module}/dashboards/pcs.json.tftpl"' in pcs
    # Each PCS list only where its group is given.
    widgets = re.sub(r"\s+", " ", loc["dashboard_widgets"])
    assert "for w in local.pcs_widgets.scaling : w if var.pcs_scaling_log_group != null" in widgets
    assert "for w in local.pcs_widgets.jobcomp : w if var.pcs_jobcomp_log_group != null" in widgets


def test_generated_files_exist_and_are_json():
    rules = json.loads((TERRAFORM / "rules" / "default-rules.json").read_text())
    assert isinstance(rules, list)
    template = (TERRAFORM / "dashboards" / "cluster.json.tftpl").read_text()
    if "%{" not in template:  # plain interpolations only: render it here
        rendered = template
        for k, v in {"cluster_name": "c", "namespace": "Slurm/c", "region": "us-east-1", "job_log_group": "/slurm-cw/c/jobs"}.items():
            rendered = rendered.replace("${" + k + "}", v)
        assert "${" not in rendered.replace("$${", ""), "the dashboard template uses an unknown variable"
        assert "widgets" in json.loads(rendered.replace("$${", "${"))
    pcs = (TERRAFORM / "dashboards" / "pcs.json.tftpl").read_text()
    assert "%{" not in pcs
    for k, v in {"region": "us-east-1", "pcs_scaling_log_group": "/pcs/s", "pcs_jobcomp_log_group": "/pcs/j"}.items():
        pcs = pcs.replace("${" + k + "}", v)
    assert "${" not in pcs, "the PCS dashboard template uses an unknown variable"
    assert set(json.loads(pcs)) == {"scaling", "jobcomp"}


def test_everything_taggable_is_tagged():
    untaggable = {
        "aws_kms_alias", "aws_sns_topic_policy", "aws_sns_topic_subscription", "aws_iam_role_policy",
        "aws_lambda_permission", "aws_cloudwatch_event_target", "aws_cloudwatch_dashboard",
        "aws_lambda_function_event_invoke_config", "aws_iam_role_policy_attachment",
    }
    for (rtype, name), body in resources().items():
        if rtype not in untaggable:
            assert body.get("tags") == "${var.tags}", f"{rtype}.{name} is not tagged with var.tags"


def test_checkov_skips_have_reasons():
    pattern = re.compile(r"#\s*checkov:skip=(CKV2?_[A-Z0-9_]+)(?::(.*))?")
    found = {}
    for f in TF_FILES:
        for line in f.read_text().splitlines():
            m = pattern.search(line)
            if m:
                assert m.group(2) and len(m.group(2).strip()) >= 30, f"{f.name}: skip of {m.group(1)} needs a real reason"
                found[m.group(1)] = m.group(2)
    assert set(found) == ALLOWED_SKIPS


# --- checkov -----------------------------------------------------------------------------------


def checkov_bin() -> str:
    tool = find_tool("checkov", "CHECKOV", REPO / ".venv-infra-checkov" / "bin")
    if tool is None:
        pytest.fail("checkov not found: run tests/infra/run.sh (it installs it), or set CHECKOV")
    return tool


def test_checkov_finds_nothing(tmp_path):
    env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_NO_OUTPUT_COLOR="1")
    cmd = [
        checkov_bin(), "-d", str(TERRAFORM), "--framework", "terraform", "--compact",
        "--skip-download", "-o", "json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.stdout.strip(), f"checkov printed nothing (exit {proc.returncode}): {proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    failed, skipped, passed, parse_errors = [], [], 0, 0
    for r in reports:
        summary = r["summary"]
        passed += summary["passed"]
        parse_errors += summary["parsing_errors"]
        results = r.get("results", {})
        failed += results.get("failed_checks", [])
        skipped += results.get("skipped_checks", [])
    detail = "\n".join(f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}" for c in failed)
    assert not failed, f"checkov failed checks:\n{detail}"
    assert parse_errors == 0, "checkov could not parse some files"
    assert passed >= 30, f"checkov passed only {passed} checks: did it see the module?"
    for c in skipped:
        assert c["check_id"] in ALLOWED_SKIPS, c["check_id"]
        assert len(c["check_result"].get("suppress_comment", "")) >= 30, c
    print(f"checkov: {passed} passed, 0 failed, {len(skipped)} skipped ({', '.join(sorted({c['check_id'] for c in skipped}))})")


# --- terraform itself, where it is installed ----------------------------------------------------

PLUGIN_DIR = pathlib.Path(os.environ.get("TF_PLUGIN_DIR", "/opt/tf-plugins"))


def terraform_bin() -> str:
    tool = shutil.which("terraform")
    if tool is None:
        pytest.skip("no terraform binary here: checked with python-hcl2 and checkov only")
    return tool


def run_tf(args, cwd, env, timeout=300):
    proc = subprocess.run([terraform_bin(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"terraform {' '.join(args)} in {cwd} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


@pytest.fixture
def tf_env(tmp_path):
    rc = tmp_path / "terraformrc"
    rc.write_text("")
    return dict(os.environ, TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1", TF_CLI_CONFIG_FILE=str(rc), NO_COLOR="1")


def test_terraform_fmt(tf_env):
    run_tf(["fmt", "-check", "-recursive", "-diff", str(TERRAFORM)], cwd=REPO, env=tf_env)


def provider_dir(major: str) -> pathlib.Path | None:
    """The newest hashicorp/aws <major>.x in PLUGIN_DIR, as its <version>/<os_arch> directory."""
    found = [d.parent for d in PLUGIN_DIR.glob(f"registry.terraform.io/hashicorp/aws/{major}.*/*/terraform-provider-aws*")]
    key = lambda d: tuple(int(x) if x.isdigit() else 0 for x in d.parent.name.split("."))
    return max(found, key=key) if found else None


@pytest.mark.parametrize("major", ["5", "6"])
def test_terraform_validate_and_mocked_tests(tmp_path, tf_env, major):
    """For each major version of hashicorp/aws the module admits: `terraform init` from a local
    provider directory holding that version alone (nothing is downloaded), `validate` of the
    module and of the example with no warning (deprecations are warnings), and the module's own
    `terraform test` with a mocked AWS provider (terraform/tests/module.tftest.hcl)."""
    terraform_bin()
    source = provider_dir(major)
    if source is None:
        pytest.skip(f"no hashicorp/aws {major}.x provider in {PLUGIN_DIR} (set TF_PLUGIN_DIR): cannot init offline")
    plugins = tmp_path / "plugins" / source.relative_to(PLUGIN_DIR)
    plugins.parent.mkdir(parents=True)
    plugins.symlink_to(source, target_is_directory=True)
    module = tmp_path / "terraform"
    shutil.copytree(TERRAFORM, module, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*"))
    init = ["init", "-backend=false", "-input=false", f"-plugin-dir={tmp_path / 'plugins'}"]
    example = module / "examples" / "basic"
    for root in (module, example):
        run_tf(init, cwd=root, env=tf_env)
        result = json.loads(run_tf(["validate", "-json"], cwd=root, env=tf_env))
        diagnostics = [f"{d['severity']}: {d['summary']}: {d.get('detail', '')}" for d in result["diagnostics"]]
        assert result["valid"] and not diagnostics, f"{root.relative_to(tmp_path)} with hashicorp/aws {source.parent.name}:\n" + "\n".join(diagnostics)
    print(f"terraform validate: module and example valid with hashicorp/aws {source.parent.name}, no warning")

    package = tmp_path / "bootstrap.zip"
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\n")
    out = run_tf(["test", "-no-color", f"-var=lambda_zip_path={package}"], cwd=module, env=tf_env, timeout=600)
    assert re.search(r"Success! \d+ passed, 0 failed", out), out
