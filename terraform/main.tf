# slurm-cw-shipper: the scheduled Lambda that derives rates, efficiency figures and an
# autoscaling signal from what the shippers send, and keeps the cluster's alarms in shape; the
# SNS topic its alarms and notices go to; the cluster's dashboard; and the IAM policy the
# cluster's instances need to ship metrics.
#
# Files by concern: lambda.tf (function, log group, dead-letter queue, its own failure alarm),
# iam.tf (execution role), kms.tf (the module's key), sns.tf (topic), schedule.tf
# (EventBridge), dashboard.tf, cluster_policy.tf (instances' policy).

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.name
  account_id = data.aws_caller_identity.current.account_id

  function_name = coalesce(var.function_name, "slurm-cw-${var.cluster_name}")
  log_group     = "/aws/lambda/${local.function_name}"

  # Every alarm the Lambda creates, changes or deletes is named with this prefix, and its role
  # may touch no other alarm.
  alarm_prefix     = "slurm-cw-${var.cluster_name}-"
  alarm_arn_prefix = "arn:${local.partition}:cloudwatch:${local.region}:${local.account_id}:alarm:${local.alarm_prefix}"

  event_bus_arn = "arn:${local.partition}:events:${local.region}:${local.account_id}:event-bus/${var.event_bus_name}"

  # The rules the Lambda keeps alarms for; rules/default-rules.json is generated from the metric
  # catalog (catalog/). Both sides of the conditional are JSON text: as values, two lists of
  # different lengths or shapes are different types, which a conditional refuses.
  alarm_rules = jsondecode(var.alarm_rules != null ? jsonencode(var.alarm_rules) : file("${path.module}/rules/default-rules.json"))

  # The Lambda's whole configuration, in its one environment variable.
  lambda_config = jsonencode({
    namespace     = var.namespace
    cluster_name  = var.cluster_name
    alarm_prefix  = local.alarm_prefix
    sns_topic_arn = aws_sns_topic.alarms.arn
    event_bus     = var.event_bus_name
    rules         = local.alarm_rules
    thresholds    = var.thresholds
  })

  # Alarms this module creates itself (not the Lambda) are named so that they never carry a
  # Lambda's prefix, "slurm-cw-" (alarm names are case-sensitive), which it prunes.
  module_alarm_prefix = "SlurmCW-${var.cluster_name}-"
}
