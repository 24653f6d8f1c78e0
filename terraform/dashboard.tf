# The cluster's dashboard; dashboards/cluster.json.tftpl is generated from the metric catalog.

resource "aws_cloudwatch_dashboard" "cluster" {
  dashboard_name = "slurm-cw-${var.cluster_name}"
  dashboard_body = templatefile("${path.module}/dashboards/cluster.json.tftpl", {
    cluster_name  = var.cluster_name
    namespace     = local.namespace
    region        = local.region
    job_log_group = aws_cloudwatch_log_group.jobs.name
  })
}
