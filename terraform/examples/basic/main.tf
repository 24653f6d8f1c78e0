# The module for one ParallelCluster cluster "hpc-prod" in us-east-1.
#
#   scripts/release.sh      (at the top of the repository: dist/slurm-cw-lambda.zip)
#   terraform init && terraform apply -var lambda_zip_path=../../../dist/slurm-cw-lambda.zip
#
# Then put the cluster_instance_policy_arn output under Iam/AdditionalIamPolicies of the head
# node and of each queue (infra/parallelcluster/cluster-config.example.yaml), and attach
# job_report_reader_policy_arn to administrators' own roles only (never an instance role).

terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = { Project = "slurm-cw-shipper" }
  }
}

variable "region" {
  description = "AWS region of the cluster."
  type        = string
  default     = "us-east-1"
}

variable "lambda_zip_path" {
  description = "Path of the Lambda package (a zip holding `bootstrap`)."
  type        = string
  default     = "../../../dist/slurm-cw-lambda.zip"
}

variable "alarm_emails" {
  description = "Who gets the cluster's alarms and notices."
  type        = list(string)
  default     = []
}

module "slurm_cw" {
  source = "../.."

  cluster_name = "hpc-prod"
  # namespace: by default "Slurm/hpc-prod", the shippers' default too. namespace = "Slurm"
  # keeps the one older versions shared (docs/deploying.md: "Moving an existing cluster").
  lambda_zip_path = var.lambda_zip_path
  alarm_emails    = var.alarm_emails

  thresholds = {
    idle_gpu_minutes = 20 # the others keep their defaults
  }

  # otlp_metrics = true lets the shippers' `otlp` destination reach CloudWatch's OTLP endpoint
  # through the same instance policy.

  # The job records (/slurm-cw/hpc-prod/jobs): kept 90 days.
  job_log_retention_days = 90

  # One run at a time. Leave it out on an account whose Lambda concurrency quota is 10 (a new
  # account's): Lambda refuses any reservation there.
  lambda_reserved_concurrency = 1

  tags = {
    Cluster = "hpc-prod"
  }
}

output "cluster_instance_policy_arn" {
  description = "For the cluster config's Iam/AdditionalIamPolicies."
  value       = module.slurm_cw.cluster_instance_policy_arn
}

output "job_report_reader_policy_arn" {
  description = "For the login nodes' Iam/AdditionalIamPolicies: reading the job records."
  value       = module.slurm_cw.job_report_reader_policy_arn
}

output "job_log_group_name" {
  description = "The job log group (the shipper's default logs.group)."
  value       = module.slurm_cw.job_log_group_name
}

output "sns_topic_arn" {
  description = "The alarm and notice topic."
  value       = module.slurm_cw.sns_topic_arn
}

output "dashboard_name" {
  description = "The cluster's dashboard."
  value       = module.slurm_cw.dashboard_name
}
