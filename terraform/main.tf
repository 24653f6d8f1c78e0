# slurm-cw-shipper: the scheduled Lambda that derives efficiency figures from what the shippers
# send, sends job findings and backlog events, and keeps the cluster's alarms in shape; the
# SNS topic its alarms and notices go to; the cluster's dashboard; and the IAM policy the
# cluster's instances need to ship metrics.
#
# Files by concern: lambda.tf (function, log group, dead-letter queue, its own failure alarm),
# iam.tf (execution role), kms.tf (the module's key), sns.tf (topic), schedule.tf
# (EventBridge), dashboard.tf, cluster_policy.tf (instances' policy), nodes.tf (the nodes' own
# role and instance profile, for AWS PCS), jobs.tf (the job log group and its readers' policy).

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  # The region is aws_region's `id`, its name in hashicorp/aws 5.x and 6.x alike: `name` is
  # deprecated in 6.x and `region` does not exist in 5.x.
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.id
  account_id = data.aws_caller_identity.current.account_id

  function_name = coalesce(var.function_name, "slurm-cw-${var.cluster_name}")
  log_group     = "/aws/lambda/${local.function_name}"

  # Every alarm the Lambda creates, changes or deletes is named with this prefix, and its role
  # may touch no other alarm. It ends in '/', which cluster names cannot hold (variables.tf), so
  # no cluster's prefix begins another's: "slurm-cw-hpc-" would also cover cluster hpc-prod's
  # alarms. The Lambda's default alarm_prefix is the same string.
  alarm_prefix     = "slurm-cw-${var.cluster_name}/"
  alarm_arn_prefix = "arn:${local.partition}:cloudwatch:${local.region}:${local.account_id}:alarm:${local.alarm_prefix}"

  # The nodes' job records (jobs.tf); the shipper's default `logs.group` and the Lambda's default
  # job_log_group are the same name.
  job_log_group = "/slurm-cw/${var.cluster_name}/jobs"
  # The `emf` destination's events (metrics.tf); the shipper's default `emf.log_group`.
  emf_log_group = "/slurm-cw/${var.cluster_name}/metrics"

  # The cluster's own namespace unless one is given, as the shipper and the Lambda default to
  # (catalog::default_namespace): IAM confines PutMetricData by namespace, not by ClusterName.
  namespace = var.namespace != null ? var.namespace : "Slurm/${var.cluster_name}"
  # The streams in it where the Lambda keeps its state (findings; PCS launch failures; budget
  # notices; the minutes derived); its
  # role may write no other, and the instances none of them (all start with "_lambda").
  lambda_cursor_stream         = "_lambda"
  lambda_scaling_cursor_stream = "_lambda-pcs-scaling"
  lambda_budget_state_stream   = "_lambda-budgets"
  lambda_minutes_state_stream  = "_lambda-minutes"

  # Failed runs in a row that page (lambda.tf): those of five minutes, two at least.
  failing_runs = max(2, ceil(5 / var.every_minutes))

  # The group AWS PCS delivers scaling logs to (not this module's), where one is given.
  pcs_scaling_log_group_arn = var.pcs_scaling_log_group == null ? "" : "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${var.pcs_scaling_log_group}"

  event_bus_arn = "arn:${local.partition}:events:${local.region}:${local.account_id}:event-bus/${var.event_bus_name}"

  # The rules the Lambda keeps alarms for; rules/default-rules.json is generated from the metric
  # catalog (catalog/). Both sides of the conditional are JSON text: as values, two lists of
  # different lengths or shapes are different types, which a conditional refuses.
  alarm_rules = jsondecode(var.alarm_rules != null ? jsonencode(var.alarm_rules) : file("${path.module}/rules/default-rules.json"))

  # The Lambda's whole configuration, in its one environment variable.
  lambda_config = jsonencode({
    namespace     = local.namespace
    cluster_name  = var.cluster_name
    alarm_prefix  = local.alarm_prefix
    sns_topic_arn = aws_sns_topic.alarms.arn
    event_bus     = var.event_bus_name
    rules         = local.alarm_rules
    thresholds    = var.thresholds
    every_minutes = var.every_minutes
    # How long after a minute its data is complete.
    shipper_flush_minutes = var.shipper_flush_minutes
    budgets               = var.account_budgets
    job_log_group         = aws_cloudwatch_log_group.jobs.name
    # null (no PCS stage) unless set.
    pcs_scaling_log_group = var.pcs_scaling_log_group
    pcs_cluster_id        = var.pcs_cluster_id
  })

  # Alarms this module creates itself (not the Lambda) are named so that they never carry a
  # Lambda's prefix, "slurm-cw-" (alarm names are case-sensitive), which it prunes.
  module_alarm_prefix = "SlurmCW-${var.cluster_name}-"
}
