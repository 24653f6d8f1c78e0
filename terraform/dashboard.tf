# The cluster's dashboard; dashboards/cluster.json.tftpl is generated from the metric catalog,
# and so is dashboards/pcs.json.tftpl: the widgets over AWS PCS's vended logs, appended where
# their log group is given (pcs_scaling_log_group, pcs_jobcomp_log_group).

locals {
  dashboard = jsondecode(templatefile("${path.module}/dashboards/cluster.json.tftpl", {
    cluster_name  = var.cluster_name
    namespace     = local.namespace
    region        = local.region
    job_log_group = aws_cloudwatch_log_group.jobs.name
  }))
  pcs_widgets = jsondecode(templatefile("${path.module}/dashboards/pcs.json.tftpl", {
    region                = local.region
    pcs_scaling_log_group = var.pcs_scaling_log_group == null ? "" : var.pcs_scaling_log_group
    pcs_jobcomp_log_group = var.pcs_jobcomp_log_group == null ? "" : var.pcs_jobcomp_log_group
  }))
  dashboard_widgets = concat(
    local.dashboard.widgets,
    [for w in local.pcs_widgets.scaling : w if var.pcs_scaling_log_group != null],
    [for w in local.pcs_widgets.jobcomp : w if var.pcs_jobcomp_log_group != null],
  )
}

resource "aws_cloudwatch_dashboard" "cluster" {
  dashboard_name = "slurm-cw-${var.cluster_name}"
  dashboard_body = jsonencode(merge(local.dashboard, { widgets = local.dashboard_widgets }))
}
