# The `emf` destination's log group: the nodes' metrics as embedded-metric-format events, one
# stream per node. CloudWatch takes the metrics out as the events arrive, so the events need not
# be kept: a day by default (emf_log_retention_days). Created whether or not the nodes use `emf`
# (an empty group costs nothing); the instances may write their streams in it
# (cluster_policy.tf).

resource "aws_cloudwatch_log_group" "emf" {
  #checkov:skip=CKV_AWS_338:The events only carry metrics CloudWatch extracts on arrival; kept emf_log_retention_days (default 1 day), the metrics themselves 15 months in CloudWatch.
  name              = local.emf_log_group
  retention_in_days = var.emf_log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = var.tags
}
