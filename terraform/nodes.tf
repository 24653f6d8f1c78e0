# The nodes' own IAM role and instance profile (create_instance_profile), for AWS PCS: a compute
# or login node group's launch template names an instance profile, and PCS accepts it only when
# its role sits under the path /aws-pcs/ or is named AWSPCS... (instance_profile_path =
# "/aws-pcs/"). ParallelCluster makes its own roles and takes cluster_instance_policy_arn instead.

locals {
  node_role_name = "slurm-cw-${var.cluster_name}-node"

  # What PCS requires of a node group's role: registering the instance with its node group.
  # The PCS agent calls it, not slurm-cw-shipper (tests/infra/test_iam_actions.py).
  node_pcs_policy = {
    Version = "2012-10-17"
    Statement = [{
      Sid      = "PcsRegistersTheNode"
      Effect   = "Allow"
      Action   = "pcs:RegisterComputeNodeGroupInstance"
      Resource = "*"
    }]
  }
}

resource "aws_iam_role" "node" {
  count                = var.create_instance_profile ? 1 : 0
  name                 = local.node_role_name
  path                 = var.instance_profile_path
  permissions_boundary = var.role_permissions_boundary
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
  tags = var.tags
}

# slurm-cw-shipper's own permissions: the cluster instance policy (cluster_policy.tf).
resource "aws_iam_role_policy_attachment" "node_shipper" {
  count      = var.create_instance_profile ? 1 : 0
  role       = aws_iam_role.node[0].name
  policy_arn = aws_iam_policy.cluster_instance.arn
}

resource "aws_iam_role_policy" "node_pcs" {
  count  = var.create_instance_profile ? 1 : 0
  name   = "pcs-register-node"
  role   = aws_iam_role.node[0].id
  policy = jsonencode(local.node_pcs_policy)
}

resource "aws_iam_role_policy_attachment" "node_extra" {
  for_each   = var.create_instance_profile ? toset(var.instance_role_policy_arns) : toset([])
  role       = aws_iam_role.node[0].name
  policy_arn = each.value
}

resource "aws_iam_instance_profile" "node" {
  count = var.create_instance_profile ? 1 : 0
  name  = local.node_role_name
  path  = var.instance_profile_path
  role  = aws_iam_role.node[0].name
  tags  = var.tags
}
