# One customer-managed key for the module's data at rest: the SNS topic, the dead-letter queue,
# the Lambda's log group, the job log group and the Lambda's environment. CloudWatch Logs
# encrypts and decrypts for its callers: writers and readers of the log groups need no KMS
# permission.

resource "aws_kms_key" "this" {
  description             = "slurm-cw-shipper ${var.cluster_name}: SNS topic, dead-letter queue, Lambda and job logs, Lambda environment"
  enable_key_rotation     = true
  deletion_window_in_days = var.kms_key_deletion_window_in_days
  policy                  = jsonencode(local.kms_key_policy)
  tags                    = var.tags
}

resource "aws_kms_alias" "this" {
  name          = "alias/slurm-cw-${var.cluster_name}"
  target_key_id = aws_kms_key.this.key_id
}

locals {
  kms_key_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        # The account administers the key; IAM policies in the account decide who else may
        # (the deployer needs kms:CreateGrant for the Lambda's environment).
        Sid       = "AccountAdministers"
        Effect    = "Allow"
        Principal = { AWS = "arn:${local.partition}:iam::${local.account_id}:root" }
        Action    = "kms:*"
        Resource  = "*"
      },
      {
        # CloudWatch alarms publish to the encrypted topic.
        Sid       = "CloudWatchAlarmsPublishToTopic"
        Effect    = "Allow"
        Principal = { Service = "cloudwatch.amazonaws.com" }
        Action    = ["kms:Decrypt", "kms:GenerateDataKey*"]
        Resource  = "*"
      },
      {
        # The Lambda publishes to the topic and sends failed events to the dead-letter queue.
        Sid       = "LambdaRolePublishes"
        Effect    = "Allow"
        Principal = { AWS = aws_iam_role.lambda.arn }
        Action    = ["kms:Decrypt", "kms:GenerateDataKey"]
        Resource  = "*"
      },
      {
        # CloudWatch Logs encrypts the module's three log groups, and no other. Names, not the
        # groups' ARNs: the groups need the key first.
        Sid       = "CloudWatchLogsEncryptsTheLogGroups"
        Effect    = "Allow"
        Principal = { Service = "logs.${local.region}.${data.aws_partition.current.dns_suffix}" }
        Action    = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
        Resource  = "*"
        Condition = {
          ArnEquals = {
            "kms:EncryptionContext:aws:logs:arn" = [
              "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${local.log_group}",
              "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${local.job_log_group}",
              "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${local.emf_log_group}",
            ]
          }
        }
      },
    ]
  }
}
