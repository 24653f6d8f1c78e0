output "cluster_instance_policy_arn" {
  description = "ARN of the IAM policy for the cluster's instances (cloudwatch:PutMetricData in the namespace, and to CloudWatch's OTLP endpoint with otlp_metrics; writing their streams of the job log group): ParallelCluster's Iam/AdditionalIamPolicies of the head node and the queues."
  value       = aws_iam_policy.cluster_instance.arn
}

output "emf_log_group_name" {
  description = "The emf destination's log group (/slurm-cw/<cluster_name>/metrics): the shipper's `emf.log_group`."
  value       = aws_cloudwatch_log_group.emf.name
}

output "job_log_group_name" {
  description = "The job log group (/slurm-cw/<cluster_name>/jobs): the shipper's `logs.group`, the Lambda's job_log_group."
  value       = aws_cloudwatch_log_group.jobs.name
}

output "job_report_reader_policy_arn" {
  description = "ARN of a read-only IAM policy for every user's job records (logs:FilterLogEvents on the job log group only), for administrators' own roles: it refuses instance-role credentials, which every user of an instance shares."
  value       = aws_iam_policy.job_report_reader.arn
}

output "sns_topic_arn" {
  description = "ARN of the SNS topic the cluster's alarms and the Lambda's notices go to."
  value       = aws_sns_topic.alarms.arn
}

output "lambda_function_name" {
  description = "Name of the scheduled Lambda."
  value       = aws_lambda_function.this.function_name
}

output "lambda_function_arn" {
  description = "ARN of the scheduled Lambda."
  value       = aws_lambda_function.this.arn
}

output "lambda_role_arn" {
  description = "ARN of the Lambda's execution role."
  value       = aws_iam_role.lambda.arn
}

output "lambda_log_group_name" {
  description = "The Lambda's CloudWatch log group."
  value       = aws_cloudwatch_log_group.lambda.name
}

output "dead_letter_queue_arn" {
  description = "ARN of the SQS queue that receives the Lambda's failed scheduled events."
  value       = aws_sqs_queue.dlq.arn
}

output "dashboard_name" {
  description = "Name of the cluster's CloudWatch dashboard."
  value       = aws_cloudwatch_dashboard.cluster.dashboard_name
}

output "alarm_prefix" {
  description = "Prefix of the names of the alarms the Lambda manages, slurm-cw-<cluster_name>/ (its role may touch no other alarm)."
  value       = local.alarm_prefix
}

output "kms_key_arn" {
  description = "ARN of the module's KMS key (SNS topic, dead-letter queue, Lambda and job logs, Lambda environment)."
  value       = aws_kms_key.this.arn
}

output "namespace" {
  description = "The cluster's CloudWatch namespace (default Slurm/<cluster_name>, the shipper's default too): set the shipper's `namespace` key to it only when the variable namespace is set."
  value       = local.namespace
}

output "instance_profile_arn" {
  description = "ARN of the nodes' instance profile (create_instance_profile; null otherwise): the iamInstanceProfileArn of an AWS PCS compute or login node group, under instance_profile_path (\"/aws-pcs/\" for PCS)."
  value       = one(aws_iam_instance_profile.node[*].arn)
}

output "instance_role_name" {
  description = "Name of the nodes' role (create_instance_profile; null otherwise), to attach further policies to."
  value       = one(aws_iam_role.node[*].name)
}
