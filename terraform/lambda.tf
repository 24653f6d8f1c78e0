# The scheduled Lambda (lambda/, binary `bootstrap`), its log group, its dead-letter queue and
# an alarm on its own failures.

resource "aws_cloudwatch_log_group" "lambda" {
  #checkov:skip=CKV_AWS_338:Retention is the log_retention_days input (default 30 days): these are operational logs of a metrics function, not audit records; set 365 or more where policy asks for it.
  name              = local.log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = var.tags
}

resource "aws_sqs_queue" "dlq" {
  name                      = "slurm-cw-${var.cluster_name}-lambda-dlq"
  kms_master_key_id         = aws_kms_key.this.arn
  message_retention_seconds = 1209600 # 14 days, the most SQS keeps
  tags                      = var.tags
}

resource "aws_lambda_function" "this" {
  #checkov:skip=CKV_AWS_117:No VPC: the function calls only public AWS APIs (CloudWatch, SNS, EventBridge) and reaches nothing inside the cluster's network; a VPC would add NAT or endpoints and no protection.
  #checkov:skip=CKV_AWS_272:No code signing: the package is built from this repository by the deployer and pinned by source_code_hash; AWS Signer profiles are outside this module (add code_signing_config_arn in a wrapper where required).
  function_name = local.function_name
  description   = "slurm-cw-shipper ${var.cluster_name}: derived metrics, autoscaling signal, alarms"
  role          = aws_iam_role.lambda.arn

  filename         = var.lambda_zip_path
  source_code_hash = filebase64sha256(var.lambda_zip_path)
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = ["x86_64"]
  memory_size      = var.lambda_memory_size
  timeout          = var.lambda_timeout

  # Unset by default (null: unreserved): Lambda refuses a reservation that leaves less than its
  # minimum unreserved (100, or all 10 of a new account's quota), so even 1 fails there. 1
  # makes the function a singleton, so that an overrunning run never overlaps the next on the
  # same alarms and findings cursor; set it where the quota allows.
  reserved_concurrent_executions = var.lambda_reserved_concurrency

  kms_key_arn = aws_kms_key.this.arn
  environment {
    variables = {
      SLURM_CW_LAMBDA_CONFIG = local.lambda_config
    }
  }

  tracing_config {
    mode = "Active"
  }

  dead_letter_config {
    target_arn = aws_sqs_queue.dlq.arn
  }

  tags = var.tags

  lifecycle {
    precondition {
      # Lambda allows 4 KB of environment in all; the rest is the runtime's own variables' room.
      condition     = length(local.lambda_config) <= 3800
      error_message = "The Lambda's configuration (SLURM_CW_LAMBDA_CONFIG: rules and thresholds) is over 3800 bytes of JSON; Lambda allows 4 KB of environment variables. Trim alarm_rules."
    }
    precondition {
      # Without it another cluster's launch failures in the same group would pass as this one's.
      condition     = var.pcs_scaling_log_group == null || var.pcs_cluster_id != null
      error_message = "pcs_cluster_id is required with pcs_scaling_log_group: the cluster's PCS id (pcs_...)."
    }
  }

  # The log groups must exist (with their retention and key) before the function first logs or
  # reads findings, and the role's permissions before the first scheduled run.
  depends_on = [aws_cloudwatch_log_group.lambda, aws_cloudwatch_log_group.jobs, aws_iam_role_policy.lambda]
}

# The schedule invokes asynchronously. A failed run is not retried: the next scheduled run
# does the same work on fresher data; what fails goes to the dead-letter queue. Events waiting
# behind a run (with lambda_reserved_concurrency = 1) expire rather than pile up.
resource "aws_lambda_function_event_invoke_config" "this" {
  function_name                = aws_lambda_function.this.function_name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = 300
}

# If the Lambda fails for 5 minutes in a row, nobody's alarms are being kept: say so.
# One period a run: with a run every five minutes, four of five one-minute periods have no
# datapoint (missing, not breaching), and an alarm on five of five one-minute periods never fired.
# Every run of the last five minutes, and of two runs at least, failed.
resource "aws_cloudwatch_metric_alarm" "lambda_failing" {
  alarm_name          = "${local.module_alarm_prefix}lambda-failing"
  alarm_description   = "The slurm-cw Lambda ${local.function_name} failed in each of its last ${local.failing_runs} runs; derived metrics and alarm upkeep for cluster ${var.cluster_name} have stopped. See ${local.log_group}."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.this.function_name }
  statistic           = "Sum"
  period              = var.every_minutes * 60
  evaluation_periods  = local.failing_runs
  datapoints_to_alarm = local.failing_runs
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
  tags                = var.tags
}
