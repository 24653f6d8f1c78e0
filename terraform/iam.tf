# The Lambda's execution role: least privilege, one statement per purpose.

locals {
  # Every permission of the Lambda's role. tests/infra/test_terraform.py reads this list.
  lambda_role_statements = [
    {
      # GetMetricData and ListMetrics support no resource-level permissions.
      Sid      = "ReadMetrics"
      Effect   = "Allow"
      Action   = ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"]
      Resource = "*"
    },
    {
      # PutMetricData supports no resource-level permissions: the namespace condition confines it.
      Sid       = "WriteDerivedMetrics"
      Effect    = "Allow"
      Action    = ["cloudwatch:PutMetricData"]
      Resource  = "*"
      Condition = { StringEquals = { "cloudwatch:namespace" = local.namespace } }
    },
    {
      # Only alarms named with the cluster's prefix ("slurm-cw-<cluster>/", which no other
      # cluster's prefix begins with). DescribeAlarms is called with
      # AlarmNamePrefix = the same prefix; if IAM ever evaluates that listing against
      # "alarm:*" instead of the named alarms, widen DescribeAlarms alone (it only reads) to
      # "arn:<partition>:cloudwatch:<region>:<account>:alarm:*".
      Sid      = "ManageClusterAlarms"
      Effect   = "Allow"
      Action   = ["cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "cloudwatch:DescribeAlarms"]
      Resource = "${local.alarm_arn_prefix}*"
    },
    {
      Sid      = "PublishNotices"
      Effect   = "Allow"
      Action   = ["sns:Publish"]
      Resource = aws_sns_topic.alarms.arn
    },
    {
      # The topic and the dead-letter queue are encrypted with the module's key.
      Sid      = "UseTheTopicKey"
      Effect   = "Allow"
      Action   = ["kms:GenerateDataKey", "kms:Decrypt"]
      Resource = aws_kms_key.this.arn
    },
    {
      Sid      = "SendEvents"
      Effect   = "Allow"
      Action   = ["events:PutEvents"]
      Resource = local.event_bus_arn
    },
    {
      # Failed scheduled events go to the dead-letter queue (Lambda sends them with this role).
      Sid      = "DeadLetterQueue"
      Effect   = "Allow"
      Action   = ["sqs:SendMessage"]
      Resource = aws_sqs_queue.dlq.arn
    },
    {
      # Job findings, read from the nodes' job records. FilterLogEvents is authorized on the log
      # group, which IAM matches as "<group ARN>:log-stream:" (an empty stream name): hence ":*"
      # beside the bare ARN. Both name this group alone.
      Sid      = "ReadJobFindings"
      Effect   = "Allow"
      Action   = ["logs:FilterLogEvents"]
      Resource = [aws_cloudwatch_log_group.jobs.arn, "${aws_cloudwatch_log_group.jobs.arn}:*"]
    },
    {
      # The cursors (findings; PCS launch failures), the budget notices sent this month and the
      # last minute derived: four streams of the job group, read back and appended to.
      Sid    = "KeepCursors"
      Effect = "Allow"
      Action = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:GetLogEvents"]
      Resource = [
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_cursor_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_scaling_cursor_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_budget_state_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_minutes_state_stream}",
      ]
    },
    {
      # The log group itself is created by this module, not by the function.
      Sid      = "WriteOwnLogs"
      Effect   = "Allow"
      Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
      Resource = "${aws_cloudwatch_log_group.lambda.arn}:*"
    },
    {
      # X-Ray supports no resource-level permissions.
      Sid      = "Tracing"
      Effect   = "Allow"
      Action   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
      Resource = "*"
    },
  ]
}

resource "aws_iam_role" "lambda" {
  name                 = "slurm-cw-${var.cluster_name}-lambda"
  path                 = var.iam_path
  permissions_boundary = var.role_permissions_boundary
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "lambda.amazonaws.com" }
      Action    = "sts:AssumeRole"
      Condition = { StringEquals = { "aws:SourceAccount" = local.account_id } }
    }]
  })
  tags = var.tags
}

locals {
  # Only where pcs_scaling_log_group is set: PCS's launch failures, read from the group PCS
  # delivers scaling logs to. FilterLogEvents is authorized on the group ("<group ARN>:*" beside
  # the bare ARN, as for the job group); that group alone.
  lambda_pcs_scaling_statement = {
    Sid      = "ReadPcsScalingLogs"
    Effect   = "Allow"
    Action   = ["logs:FilterLogEvents"]
    Resource = [local.pcs_scaling_log_group_arn, "${local.pcs_scaling_log_group_arn}:*"]
  }
}

resource "aws_iam_role_policy" "lambda" {
  name = "slurm-cw-lambda"
  role = aws_iam_role.lambda.id
  policy = jsonencode({
    Version   = "2012-10-17"
    Statement = concat(local.lambda_role_statements, var.pcs_scaling_log_group == null ? [] : [local.lambda_pcs_scaling_statement])
  })
}
