# What the cluster's instances need to run slurm-cw-shipper: PutMetricData into the cluster's
# namespace (a node of another cluster, with that cluster's policy, cannot write this one's),
# and writing their own streams of the job log group; nothing else. For ParallelCluster:
# HeadNode/Iam/AdditionalIamPolicies and Scheduling/SlurmQueues[]/Iam/AdditionalIamPolicies,
# `- Policy: <cluster_instance_policy_arn>`.

locals {
  cluster_instance_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        # PutMetricData supports no resource-level permissions: the namespace condition confines it.
        Sid       = "ShipSlurmMetrics"
        Effect    = "Allow"
        Action    = "cloudwatch:PutMetricData"
        Resource  = "*"
        Condition = { StringEquals = { "cloudwatch:namespace" = local.namespace } }
      },
      {
        # Job records: each node creates its stream (named after the node) on first use and
        # writes to it. Both actions are authorized on the stream; no reading, no other group.
        Sid      = "WriteJobRecords"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "${aws_cloudwatch_log_group.jobs.arn}:log-stream:*"
      },
      {
        # The Lambda's cursors live in the same group, in streams named "_lambda...": a node
        # writing there could make the Lambda skip findings or launch failures.
        Sid      = "NotTheLambdaCursor"
        Effect   = "Deny"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_cursor_stream}*"
      },
    ]
  }
}

resource "aws_iam_policy" "cluster_instance" {
  name        = "slurm-cw-shipper-${var.cluster_name}"
  path        = var.iam_path
  description = "slurm-cw-shipper on the instances of cluster ${var.cluster_name}: cloudwatch:PutMetricData in namespace ${local.namespace}, logs:CreateLogStream and logs:PutLogEvents in ${local.job_log_group}"
  policy      = jsonencode(local.cluster_instance_policy)
  tags        = var.tags
}
