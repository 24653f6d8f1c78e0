# What the cluster's instances need to run slurm-cw-shipper: PutMetricData into the namespace,
# nothing else. For ParallelCluster: HeadNode/Iam/AdditionalIamPolicies and
# Scheduling/SlurmQueues[]/Iam/AdditionalIamPolicies, `- Policy: <cluster_instance_policy_arn>`.

locals {
  cluster_instance_policy = {
    Version = "2012-10-17"
    Statement = [{
      # PutMetricData supports no resource-level permissions: the namespace condition confines it.
      Sid       = "ShipSlurmMetrics"
      Effect    = "Allow"
      Action    = "cloudwatch:PutMetricData"
      Resource  = "*"
      Condition = { StringEquals = { "cloudwatch:namespace" = var.namespace } }
    }]
  }
}

resource "aws_iam_policy" "cluster_instance" {
  name        = "slurm-cw-shipper-${var.cluster_name}"
  path        = var.iam_path
  description = "slurm-cw-shipper on the instances of cluster ${var.cluster_name}: cloudwatch:PutMetricData in namespace ${var.namespace} only"
  policy      = jsonencode(local.cluster_instance_policy)
  tags        = var.tags
}
