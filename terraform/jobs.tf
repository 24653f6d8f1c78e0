# The job log group: the nodes' job records (job_sample, job_summary, job_finding), one stream
# per node, plus the Lambda's findings cursor in its `_lambda` stream. The instances may write
# streams in it (cluster_policy.tf), the Lambda reads findings from it (iam.tf), and
# job_report_reader lets administrators read it.

resource "aws_cloudwatch_log_group" "jobs" {
  #checkov:skip=CKV_AWS_338:Retention is the job_log_retention_days input (default 30 days): per-job usage records for reports and the dashboard, not audit records; set 365 or more where policy asks for it.
  name              = local.job_log_group
  retention_in_days = var.job_log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = var.tags
}

locals {
  job_report_reader_policy = {
    Version = "2012-10-17"
    Statement = [{
      # FilterLogEvents is authorized on the log group, which IAM matches as
      # "<group ARN>:log-stream:" (an empty stream name): hence ":*" beside the bare ARN. Both
      # name this group alone (log group names cannot hold ':').
      Sid      = "ReadJobRecords"
      Effect   = "Allow"
      Action   = "logs:FilterLogEvents"
      Resource = [aws_cloudwatch_log_group.jobs.arn, "${aws_cloudwatch_log_group.jobs.arn}:*"]
      }, {
      # Every user's records (users, accounts, the programs they ran, what they used) are in the
      # group, and every user of an instance can use its role: so never with instance-role
      # credentials (ec2:SourceInstanceARN is present exactly on those), only with a person's
      # own (an SSO or assumed administrator role).
      Sid       = "NotFromSharedInstances"
      Effect    = "Deny"
      Action    = "logs:FilterLogEvents"
      Resource  = [aws_cloudwatch_log_group.jobs.arn, "${aws_cloudwatch_log_group.jobs.arn}:*"]
      Condition = { Null = { "ec2:SourceInstanceARN" = "false" } }
    }]
  }
}

# For administrators who run `slurm-cw-shipper report` over every user's job records: reading
# them, nothing else. Attach it to an administrator's role or group, never to an instance
# role (login nodes are shared: IAM cannot give each user their own jobs alone there; the
# policy refuses instance-role credentials anyway).
resource "aws_iam_policy" "job_report_reader" {
  name        = "slurm-cw-job-report-reader-${var.cluster_name}"
  path        = var.iam_path
  description = "Read the job records of cluster ${var.cluster_name}: logs:FilterLogEvents on ${local.job_log_group} only"
  policy      = jsonencode(local.job_report_reader_policy)
  tags        = var.tags
}
