# Offline tests of the module with a mocked AWS provider (Terraform >= 1.7): nothing is
# created and no credentials are needed. lambda_zip_path must name an existing .zip:
#
#   terraform init -backend=false && terraform test -var lambda_zip_path=/path/to/any.zip
#
# tests/infra/test_terraform.py runs this with the provider from a local plugin directory.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws", dns_suffix = "amazonaws.com" }
  }
  mock_data "aws_region" {
    defaults = { id = "eu-west-1" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/slurm-cw-test-lambda" }
  }
  mock_resource "aws_iam_policy" {
    defaults = { arn = "arn:aws:iam::123456789012:policy/slurm-cw-shipper-test" }
  }
  mock_resource "aws_kms_key" {
    defaults = { arn = "arn:aws:kms:eu-west-1:123456789012:key/00000000-0000-0000-0000-000000000000" }
  }
  mock_resource "aws_sns_topic" {
    defaults = { arn = "arn:aws:sns:eu-west-1:123456789012:slurm-cw-test-alarms" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:eu-west-1:123456789012:slurm-cw-test-lambda-dlq" }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/slurm-cw-test" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:eu-west-1:123456789012:rule/slurm-cw-test-schedule" }
  }
  mock_resource "aws_lambda_function" {
    defaults = { arn = "arn:aws:lambda:eu-west-1:123456789012:function:slurm-cw-test" }
  }
}

# Three log groups and two policies: the mock's defaults above are the Lambda's group and the
# instance policy.
override_resource {
  target = aws_cloudwatch_log_group.jobs
  values = { arn = "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs" }
}

override_resource {
  target = aws_cloudwatch_log_group.emf
  values = { arn = "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/metrics" }
}

override_resource {
  target = aws_iam_policy.job_report_reader
  values = { arn = "arn:aws:iam::123456789012:policy/slurm-cw-job-report-reader-test" }
}

variables {
  cluster_name = "test"
}

run "defaults" {
  command = apply

  assert {
    condition = (
      aws_lambda_function.this.runtime == "provided.al2023" &&
      aws_lambda_function.this.handler == "bootstrap" &&
      tolist(aws_lambda_function.this.architectures) == tolist(["x86_64"]) &&
      aws_lambda_function.this.memory_size == 256 &&
      aws_lambda_function.this.timeout == 60 &&
      aws_lambda_function.this.reserved_concurrent_executions == null &&
      aws_lambda_function.this.tracing_config[0].mode == "Active" &&
      aws_lambda_function.this.function_name == "slurm-cw-test"
    )
    error_message = "The Lambda is not provided.al2023/bootstrap/x86_64, 256 MB, 60 s, no reserved concurrency, traced."
  }

  assert {
    condition     = tolist(keys(aws_lambda_function.this.environment[0].variables)) == tolist(["SLURM_CW_LAMBDA_CONFIG"])
    error_message = "The Lambda must have exactly one environment variable, SLURM_CW_LAMBDA_CONFIG."
  }

  assert {
    condition = jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG) == {
      namespace     = "Slurm/test"
      cluster_name  = "test"
      alarm_prefix  = "slurm-cw-test/"
      sns_topic_arn = "arn:aws:sns:eu-west-1:123456789012:slurm-cw-test-alarms"
      event_bus     = "default"
      job_log_group = "/slurm-cw/test/jobs"
      # No PCS stage unless pcs_scaling_log_group is given.
      pcs_scaling_log_group = null
      pcs_cluster_id        = null
      rules                 = jsondecode(file("${path.module}/rules/default-rules.json"))
      thresholds = {
        idle_gpu_percent              = 5
        idle_gpu_minutes              = 30
        low_cpu_efficiency_percent    = 20
        low_cpu_minutes               = 60
        memory_over_requested_percent = 25
        backlog_change_nodes          = 1
      }
      # No account budgets unless account_budgets is given.
      budgets = {}
      # A run every five minutes derives each of them...
      every_minutes = 5
      # ...once the nodes, flushing every two minutes, have sent them.
      shipper_flush_minutes = 2
    }
    error_message = "SLURM_CW_LAMBDA_CONFIG: ${aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG}"
  }

  assert {
    condition = (
      aws_cloudwatch_log_group.lambda.name == "/aws/lambda/slurm-cw-test" &&
      aws_cloudwatch_log_group.lambda.retention_in_days == 30 &&
      aws_cloudwatch_log_group.lambda.kms_key_id == aws_kms_key.this.arn
    )
    error_message = "The log group must be /aws/lambda/<name>, kept 30 days, encrypted with the module's key."
  }

  assert {
    condition = (
      aws_cloudwatch_log_group.jobs.name == "/slurm-cw/test/jobs" &&
      aws_cloudwatch_log_group.jobs.retention_in_days == 30 &&
      aws_cloudwatch_log_group.jobs.kms_key_id == aws_kms_key.this.arn &&
      output.job_log_group_name == "/slurm-cw/test/jobs"
    )
    error_message = "The job log group must be /slurm-cw/<cluster_name>/jobs, kept 30 days, encrypted with the module's key."
  }

  assert {
    condition = (
      aws_cloudwatch_log_group.emf.name == "/slurm-cw/test/metrics" &&
      aws_cloudwatch_log_group.emf.retention_in_days == 1 &&
      aws_cloudwatch_log_group.emf.kms_key_id == aws_kms_key.this.arn &&
      output.emf_log_group_name == "/slurm-cw/test/metrics" &&
      one([for s in jsondecode(aws_iam_policy.cluster_instance.policy).Statement : s.Resource if s.Sid == "WriteMetricEvents"]) == "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/metrics:log-stream:*"
    )
    error_message = "The emf log group must be /slurm-cw/<cluster_name>/metrics, kept a day, encrypted with the module's key, its streams writable by the instances."
  }

  assert {
    condition = one([for s in jsondecode(aws_kms_key.this.policy).Statement : s.Condition.ArnEquals["kms:EncryptionContext:aws:logs:arn"] if s.Sid == "CloudWatchLogsEncryptsTheLogGroups"]) == [
      "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/slurm-cw-test",
      "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs",
      "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/metrics",
    ]
    error_message = "The key policy must let CloudWatch Logs encrypt the module's three log groups and no other: ${aws_kms_key.this.policy}"
  }

  assert {
    condition = (
      aws_cloudwatch_event_rule.schedule.schedule_expression == "rate(5 minutes)" &&
      aws_cloudwatch_event_target.lambda.arn == aws_lambda_function.this.arn &&
      aws_lambda_permission.schedule.principal == "events.amazonaws.com" &&
      aws_lambda_permission.schedule.source_arn == aws_cloudwatch_event_rule.schedule.arn
    )
    error_message = "The schedule must invoke the Lambda every five minutes (every_minutes), with a permission restricted to the rule."
  }

  assert {
    condition     = aws_kms_key.this.enable_key_rotation && aws_sns_topic.alarms.kms_master_key_id == aws_kms_key.this.arn
    error_message = "The topic must be encrypted with the module's key, which rotates."
  }

  assert {
    condition = jsondecode(aws_iam_policy.cluster_instance.policy).Statement == [
      {
        Sid       = "ShipSlurmMetrics"
        Effect    = "Allow"
        Action    = "cloudwatch:PutMetricData"
        Resource  = "*"
        Condition = { StringEquals = { "cloudwatch:namespace" = "Slurm/test" } }
      },
      {
        Sid      = "WriteJobRecords"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:log-stream:*"
      },
      {
        Sid      = "WriteMetricEvents"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/metrics:log-stream:*"
      },
      {
        Sid      = "NotTheLambdaCursor"
        Effect   = "Deny"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:log-stream:_lambda*"
      },
      {
        Sid      = "LookUpNodePrices"
        Effect   = "Allow"
        Action   = ["ec2:DescribeSpotPriceHistory", "pricing:GetProducts"]
        Resource = "*"
      },
    ]
    error_message = "The instance policy must allow cloudwatch:PutMetricData in the namespace, writing the job log group's streams (not the Lambda's) and reading prices, nothing else: ${aws_iam_policy.cluster_instance.policy}"
  }

  assert {
    condition = jsondecode(aws_iam_policy.job_report_reader.policy).Statement == [{
      Sid      = "ReadJobRecords"
      Effect   = "Allow"
      Action   = "logs:FilterLogEvents"
      Resource = ["arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs", "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:*"]
      }, {
      Sid       = "NotFromSharedInstances"
      Effect    = "Deny"
      Action    = "logs:FilterLogEvents"
      Resource  = ["arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs", "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:*"]
      Condition = { Null = { "ec2:SourceInstanceARN" = "false" } }
    }]
    error_message = "The job report reader policy must allow logs:FilterLogEvents on the job log group only, and never to instance-role credentials: ${aws_iam_policy.job_report_reader.policy}"
  }

  assert {
    condition     = output.job_report_reader_policy_arn == "arn:aws:iam::123456789012:policy/slurm-cw-job-report-reader-test"
    error_message = "job_report_reader_policy_arn must be the reader policy's ARN."
  }

  assert {
    condition = {
      for s in jsondecode(aws_iam_role_policy.lambda.policy).Statement : s.Sid => s.Resource
      } == {
      ReadMetrics         = "*"
      WriteDerivedMetrics = "*"
      ManageClusterAlarms = "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:slurm-cw-test/*"
      PublishNotices      = "arn:aws:sns:eu-west-1:123456789012:slurm-cw-test-alarms"
      UseTheTopicKey      = "arn:aws:kms:eu-west-1:123456789012:key/00000000-0000-0000-0000-000000000000"
      SendEvents          = "arn:aws:events:eu-west-1:123456789012:event-bus/default"
      DeadLetterQueue     = "arn:aws:sqs:eu-west-1:123456789012:slurm-cw-test-lambda-dlq"
      ReadJobFindings     = ["arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs", "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:*"]
      KeepCursors = [
        "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:log-stream:_lambda",
        "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:log-stream:_lambda-pcs-scaling",
        "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:log-stream:_lambda-budgets",
        "arn:aws:logs:eu-west-1:123456789012:log-group:/slurm-cw/test/jobs:log-stream:_lambda-minutes",
      ]
      WriteOwnLogs = "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/slurm-cw-test:*"
      Tracing      = "*"
    }
    error_message = "The Lambda role's statements have unexpected resources: ${aws_iam_role_policy.lambda.policy}"
  }

  assert {
    condition     = output.dashboard_name == "slurm-cw-test" && jsondecode(aws_cloudwatch_dashboard.cluster.dashboard_body) != null
    error_message = "The dashboard must be slurm-cw-<cluster_name> with a JSON body."
  }

  # The cluster's own namespace, everywhere: what the nodes and the Lambda may write, what the
  # dashboard draws, what the output tells.
  assert {
    condition = (
      output.namespace == "Slurm/test" &&
      one([for s in jsondecode(aws_iam_role_policy.lambda.policy).Statement : s.Condition.StringEquals["cloudwatch:namespace"] if s.Sid == "WriteDerivedMetrics"]) == "Slurm/test" &&
      strcontains(aws_cloudwatch_dashboard.cluster.dashboard_body, "\"Slurm/test\"")
    )
    error_message = "The default namespace must be Slurm/<cluster_name> in the output, the Lambda's policy and the dashboard."
  }

  assert {
    condition     = !startswith(aws_cloudwatch_metric_alarm.lambda_failing.alarm_name, "slurm-cw-")
    error_message = "The module's own alarm must not carry the prefix the Lambda prunes."
  }

  # A run every five minutes leaves four of five one-minute periods without a datapoint: the
  # alarm's period is a run's, and two failed runs in a row page.
  assert {
    condition = (
      aws_cloudwatch_metric_alarm.lambda_failing.period == 300 &&
      aws_cloudwatch_metric_alarm.lambda_failing.evaluation_periods == 2 &&
      aws_cloudwatch_metric_alarm.lambda_failing.datapoints_to_alarm == 2
    )
    error_message = "lambda-failing must evaluate one period per run (every_minutes), two runs in a row."
  }

  # Nothing of AWS PCS unless asked: no node role or profile, no PCS widget.
  assert {
    condition = (
      length(aws_iam_role.node) == 0 && length(aws_iam_instance_profile.node) == 0 &&
      output.instance_profile_arn == null &&
      !strcontains(aws_cloudwatch_dashboard.cluster.dashboard_body, "AWS PCS")
    )
    error_message = "Without the PCS inputs the module must create no node role and draw no PCS widget."
  }
}

# AWS PCS: the scaling logs reach the Lambda (and its role, for that group alone), both groups
# the dashboard, and the nodes get a role and instance profile under /aws-pcs/.
run "pcs" {
  command = apply

  variables {
    pcs_scaling_log_group     = "/aws/vendedlogs/pcs/pcs_abc123de45/scaling"
    pcs_cluster_id            = "pcs_abc123de45"
    pcs_jobcomp_log_group     = "/aws/vendedlogs/pcs/pcs_abc123de45/jobcomp"
    create_instance_profile   = true
    instance_profile_path     = "/aws-pcs/"
    instance_role_policy_arns = ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
  }

  assert {
    condition     = jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).pcs_scaling_log_group == "/aws/vendedlogs/pcs/pcs_abc123de45/scaling"
    error_message = "pcs_scaling_log_group must reach the Lambda's configuration."
  }

  assert {
    condition     = jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).pcs_cluster_id == "pcs_abc123de45"
    error_message = "pcs_cluster_id must reach the Lambda's configuration."
  }

  assert {
    condition = one([for s in jsondecode(aws_iam_role_policy.lambda.policy).Statement : s if s.Sid == "ReadPcsScalingLogs"]) == {
      Sid      = "ReadPcsScalingLogs"
      Effect   = "Allow"
      Action   = ["logs:FilterLogEvents"]
      Resource = ["arn:aws:logs:eu-west-1:123456789012:log-group:/aws/vendedlogs/pcs/pcs_abc123de45/scaling", "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/vendedlogs/pcs/pcs_abc123de45/scaling:*"]
    }
    error_message = "The Lambda's role must read the PCS scaling group, and that group alone: ${aws_iam_role_policy.lambda.policy}"
  }

  assert {
    condition = (
      strcontains(aws_cloudwatch_dashboard.cluster.dashboard_body, "SOURCE '/aws/vendedlogs/pcs/pcs_abc123de45/scaling'") &&
      strcontains(aws_cloudwatch_dashboard.cluster.dashboard_body, "SOURCE '/aws/vendedlogs/pcs/pcs_abc123de45/jobcomp'") &&
      length(jsondecode(aws_cloudwatch_dashboard.cluster.dashboard_body).widgets) == length(jsondecode(file("${path.module}/dashboards/cluster.json.tftpl")).widgets) + 5
    )
    error_message = "The dashboard must add the PCS widgets over both groups."
  }

  assert {
    condition = (
      aws_iam_role.node[0].path == "/aws-pcs/" && aws_iam_instance_profile.node[0].path == "/aws-pcs/" &&
      aws_iam_role.node[0].name == "slurm-cw-test-node" &&
      aws_iam_instance_profile.node[0].role == aws_iam_role.node[0].name &&
      aws_iam_role_policy_attachment.node_shipper[0].policy_arn == aws_iam_policy.cluster_instance.arn &&
      jsondecode(aws_iam_role_policy.node_pcs[0].policy).Statement[0].Action == "pcs:RegisterComputeNodeGroupInstance" &&
      keys(aws_iam_role_policy_attachment.node_extra) == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"] &&
      output.instance_profile_arn == aws_iam_instance_profile.node[0].arn && output.instance_role_name == "slurm-cw-test-node"
    )
    error_message = "The nodes' role and profile must sit under /aws-pcs/ with the instance policy, PCS's registration and the extra policies."
  }
}

# job_cost_price_lookup = false (prices configured): no price look-up in the instance policy.
run "no_price_lookup" {
  command = plan

  variables {
    job_cost_price_lookup = false
  }

  assert {
    condition     = [for s in jsondecode(aws_iam_policy.cluster_instance.policy).Statement : s.Sid] == ["ShipSlurmMetrics", "WriteJobRecords", "WriteMetricEvents", "NotTheLambdaCursor"]
    error_message = "job_cost_price_lookup = false must leave LookUpNodePrices out: ${aws_iam_policy.cluster_instance.policy}"
  }
}

# otlp_metrics: the same policy (what ParallelCluster and the nodes' role already have) gains
# PutMetricData for requests without a namespace key, after the statements it had.
run "otlp_metrics" {
  command = apply

  variables {
    otlp_metrics            = true
    create_instance_profile = true
  }

  assert {
    condition = (
      [for s in jsondecode(aws_iam_policy.cluster_instance.policy).Statement : s.Sid] == ["ShipSlurmMetrics", "WriteJobRecords", "WriteMetricEvents", "NotTheLambdaCursor", "ShipOtlpMetrics", "LookUpNodePrices"] &&
      jsondecode(aws_iam_policy.cluster_instance.policy).Statement[0].Condition == { StringEquals = { "cloudwatch:namespace" = "Slurm/test" } } &&
      jsondecode(aws_iam_policy.cluster_instance.policy).Statement[4] == {
        Sid       = "ShipOtlpMetrics"
        Effect    = "Allow"
        Action    = "cloudwatch:PutMetricData"
        Resource  = "*"
        Condition = { Null = { "cloudwatch:namespace" = "true" } }
      }
    )
    error_message = "otlp_metrics must add ShipOtlpMetrics (PutMetricData without a cloudwatch:namespace key) after the instance policy's statements: ${aws_iam_policy.cluster_instance.policy}"
  }

  assert {
    condition     = aws_iam_role_policy_attachment.node_shipper[0].policy_arn == aws_iam_policy.cluster_instance.arn && output.cluster_instance_policy_arn == aws_iam_policy.cluster_instance.arn
    error_message = "The nodes' role and ParallelCluster must get the OTLP statement through the one instance policy."
  }
}

# Without the cluster's id, another cluster's launch failures would pass as this one's.
run "rejects_pcs_scaling_log_group_without_pcs_cluster_id" {
  command = plan
  variables {
    pcs_scaling_log_group = "/aws/vendedlogs/pcs/pcs_abc123de45/scaling"
  }
  expect_failures = [aws_lambda_function.this]
}

run "rejects_instance_profile_path_without_slashes" {
  command = plan
  variables {
    instance_profile_path = "aws-pcs"
  }
  expect_failures = [var.instance_profile_path]
}

run "custom_rules_thresholds_and_bus" {
  command = apply

  variables {
    namespace      = "Custom/Slurm"
    event_bus_name = "ops"
    alarm_rules    = [{ metric = "NodesDown", threshold = 1 }]
    thresholds     = { idle_gpu_percent = 10 }
    tags           = { Team = "hpc" }
  }

  assert {
    condition = (
      jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).rules == [{ metric = "NodesDown", threshold = 1 }] &&
      jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).thresholds.idle_gpu_percent == 10 &&
      jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).thresholds.idle_gpu_minutes == 30 &&
      jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).namespace == "Custom/Slurm" &&
      jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).event_bus == "ops"
    )
    error_message = "alarm_rules, thresholds, namespace or event_bus_name did not reach the Lambda's config."
  }

  assert {
    condition = (
      jsondecode(aws_iam_policy.cluster_instance.policy).Statement[0].Condition.StringEquals["cloudwatch:namespace"] == "Custom/Slurm" &&
      one([for s in jsondecode(aws_iam_role_policy.lambda.policy).Statement : s.Resource if s.Sid == "SendEvents"]) == "arn:aws:events:eu-west-1:123456789012:event-bus/ops"
    )
    error_message = "The namespace condition or the event bus ARN does not follow the inputs."
  }

  assert {
    condition     = alltrue([for t in [aws_lambda_function.this.tags, aws_sns_topic.alarms.tags, aws_iam_policy.cluster_instance.tags, aws_iam_policy.job_report_reader.tags, aws_kms_key.this.tags, aws_cloudwatch_log_group.lambda.tags, aws_cloudwatch_log_group.jobs.tags] : t == tomap({ Team = "hpc" })])
    error_message = "tags must reach the taggable resources."
  }
}

# Every setting of the function that the module exposes reaches it.
run "function_settings" {
  command = apply

  variables {
    function_name               = "custom-fn"
    lambda_memory_size          = 512
    lambda_timeout              = 45
    lambda_reserved_concurrency = 1
    log_retention_days          = 90
    job_log_retention_days      = 365
    every_minutes               = 1
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.lambda_failing.period == 60 &&
      aws_cloudwatch_metric_alarm.lambda_failing.evaluation_periods == 5 &&
      aws_cloudwatch_metric_alarm.lambda_failing.datapoints_to_alarm == 5
    )
    error_message = "With a run a minute, lambda-failing pages after five failed runs."
  }

  assert {
    condition = (
      aws_lambda_function.this.function_name == "custom-fn" &&
      aws_lambda_function.this.memory_size == 512 &&
      aws_lambda_function.this.timeout == 45 &&
      aws_lambda_function.this.reserved_concurrent_executions == 1 &&
      aws_cloudwatch_log_group.lambda.name == "/aws/lambda/custom-fn" &&
      aws_cloudwatch_log_group.lambda.retention_in_days == 90 &&
      aws_cloudwatch_log_group.jobs.retention_in_days == 365
    )
    error_message = "function_name, lambda_memory_size, lambda_timeout, lambda_reserved_concurrency or a retention did not reach the function or its log groups."
  }
}

# Two clusters whose names begin alike: neither's prefix begins the other's, so neither's
# Lambda (or role) can touch the other's alarms.
run "cluster_hpc" {
  command = plan
  variables {
    cluster_name = "hpc"
  }
  assert {
    condition     = output.alarm_prefix == "slurm-cw-hpc/" && output.namespace == "Slurm/hpc"
    error_message = "alarm_prefix must be slurm-cw-<cluster_name>/ and the namespace Slurm/<cluster_name>."
  }
}

run "cluster_hpc_prod" {
  command = plan
  variables {
    cluster_name = "hpc-prod"
  }
  assert {
    condition = (
      output.alarm_prefix == "slurm-cw-hpc-prod/" &&
      !startswith("${output.alarm_prefix}NodesDown", run.cluster_hpc.alarm_prefix) &&
      !startswith("${run.cluster_hpc.alarm_prefix}NodesDown", output.alarm_prefix) &&
      output.namespace == "Slurm/hpc-prod" &&
      jsondecode(aws_iam_policy.cluster_instance.policy).Statement[0].Condition.StringEquals["cloudwatch:namespace"] != run.cluster_hpc.namespace
    )
    error_message = "The alarm prefixes or the namespaces of clusters hpc and hpc-prod overlap."
  }
}

run "rejects_aws_namespace" {
  command = plan
  variables {
    namespace = "AWS/EC2"
  }
  expect_failures = [var.namespace]
}

run "rejects_namespace_starting_with_a_colon" {
  command = plan
  variables {
    namespace = ":Slurm"
  }
  expect_failures = [var.namespace]
}

# A cluster that keeps the namespace older versions shared (README: "Moving an existing
# cluster"): everything follows the variable.
run "keeps_the_shared_namespace" {
  command = apply
  variables {
    namespace = "Slurm"
  }
  assert {
    condition = (
      output.namespace == "Slurm" &&
      jsondecode(aws_iam_policy.cluster_instance.policy).Statement[0].Condition.StringEquals["cloudwatch:namespace"] == "Slurm" &&
      jsondecode(aws_lambda_function.this.environment[0].variables.SLURM_CW_LAMBDA_CONFIG).namespace == "Slurm"
    )
    error_message = "namespace = \"Slurm\" must reach the output, the instance policy and the Lambda."
  }
}

run "rejects_bad_cluster_name" {
  command = plan
  variables {
    cluster_name = "has spaces"
  }
  expect_failures = [var.cluster_name]
}

run "rejects_slash_in_cluster_name" {
  command = plan
  variables {
    cluster_name = "hpc/prod"
  }
  expect_failures = [var.cluster_name]
}

run "rejects_zero_reserved_concurrency" {
  command = plan
  variables {
    lambda_reserved_concurrency = 0
  }
  expect_failures = [var.lambda_reserved_concurrency]
}

run "rejects_bad_schedule" {
  command = plan
  variables {
    every_minutes = 0
  }
  expect_failures = [var.every_minutes]
}

run "rejects_bad_flush_minutes" {
  command = plan
  variables {
    shipper_flush_minutes = 61
  }
  expect_failures = [var.shipper_flush_minutes]
}

run "rejects_bad_threshold" {
  command = plan
  variables {
    thresholds = { low_cpu_efficiency_percent = 150 }
  }
  expect_failures = [var.thresholds]
}

run "rejects_config_over_lambda_environment_limit" {
  command = plan
  variables {
    alarm_rules = [for i in range(100) : { metric = "SomeRatherLongMetricName${i}", threshold = i }]
  }
  expect_failures = [aws_lambda_function.this]
}
