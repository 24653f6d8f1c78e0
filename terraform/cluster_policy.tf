# What the cluster's instances need to run slurm-cw-shipper: PutMetricData into the cluster's
# namespace (a node of another cluster, with that cluster's policy, cannot write this one's),
# and writing their own streams of the job log group; nothing else. For ParallelCluster:
# HeadNode/Iam/AdditionalIamPolicies and Scheduling/SlurmQueues[]/Iam/AdditionalIamPolicies,
# `- Policy: <cluster_instance_policy_arn>`. With otlp_metrics the same policy also lets the
# shipper's `otlp` destination send to CloudWatch's OTLP endpoint: nothing else to attach.

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
        # The `emf` destination's events: each node creates its stream in the metrics group and
        # writes to it. CloudWatch makes metrics of them in the events' own namespace, which
        # IAM cannot confine (no cloudwatch:namespace key on PutLogEvents): a node could write
        # another namespace's metrics this way, as any writer of a log group can.
        Sid      = "WriteMetricEvents"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "${aws_cloudwatch_log_group.emf.arn}:log-stream:*"
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

  # otlp_metrics: the `otlp` destination's requests to CloudWatch's OTLP endpoint,
  # https://monitoring.<region>.amazonaws.com/v1/metrics (SigV4, service `monitoring`). That
  # endpoint authorizes cloudwatch:PutMetricData: CloudWatchAPIKeyAccess, the managed policy of
  # its bearer-token auth, holds PutMetricData and CallWithBearerToken (CloudWatch User Guide,
  # CloudWatch-OTLP-MetricsBearerTokenAuth), and a StringEquals on cloudwatch:namespace, as in
  # ShipSlurmMetrics, "implicitly denies any OTLP ingest" (iam-cw-condition-keys-namespace,
  # "Controlling OTLP ingest"). OTLP has no namespace: this allows PutMetricData only when the
  # request has no cloudwatch:namespace key. Every classic PutMetricData names a namespace, so a
  # node still cannot write another cluster's. Not verified against AWS that OTLP requests lack
  # the key: if they carry it, this grants nothing and the destination gets 403 (fails closed).
  otlp_metrics_statement = {
    Sid       = "ShipOtlpMetrics"
    Effect    = "Allow"
    Action    = "cloudwatch:PutMetricData"
    Resource  = "*"
    Condition = { Null = { "cloudwatch:namespace" = "true" } }
  }
}

locals {
  # job_cost_price_lookup: the node's price for job costs (shipper/src/cost/lookup.rs), by
  # signed HTTPS requests, one an hour at most per node: the Spot price of a Spot instance's
  # type in its zone, else the On-Demand price of its type (kept a day on disk). Neither action
  # supports resource-level permissions or condition keys; both only read public prices.
  price_lookup_statement = {
    Sid      = "LookUpNodePrices"
    Effect   = "Allow"
    Action   = ["ec2:DescribeSpotPriceHistory", "pricing:GetProducts"]
    Resource = "*"
  }
}

# One policy either way: ParallelCluster's Iam/AdditionalIamPolicies and the nodes' role
# (nodes.tf) take it as they are. The description stays fixed: changing it replaces the policy,
# which fails while ParallelCluster's roles have it attached.
resource "aws_iam_policy" "cluster_instance" {
  name = "slurm-cw-shipper-${var.cluster_name}"
  path = var.iam_path
  # Of the cluster's name alone: a namespace moved to Slurm/<cluster> (docs/deploying.md) must
  # not change it. And never changed once made (ignore_changes below): a deployment made with
  # an earlier module's text (which named the namespace) keeps it, not replaced by this one.
  description = "slurm-cw-shipper on the instances of cluster ${var.cluster_name}: its metrics, job records and price look-ups"
  policy = jsonencode({
    Version = local.cluster_instance_policy.Version
    Statement = concat(
      local.cluster_instance_policy.Statement,
      var.otlp_metrics ? [local.otlp_metrics_statement] : [],
      var.job_cost_price_lookup ? [local.price_lookup_statement] : [],
    )
  })
  tags = var.tags

  lifecycle {
    ignore_changes = [description]
  }
}
