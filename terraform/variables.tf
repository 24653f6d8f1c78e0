variable "cluster_name" {
  description = "The Slurm cluster's name: the ClusterName dimension the shippers send (slurm.conf ClusterName; on ParallelCluster, the cluster's name). Names the Lambda, the alarms, the dashboard and the IAM objects."
  type        = string

  validation {
    # The longest names derived from it ("slurm-cw-job-report-reader-<cluster_name>", an IAM
    # policy) and the alarm names "slurm-cw-<cluster_name>/..." must stay well inside AWS's
    # limits. No '/': it ends the alarm prefix, so that no cluster's prefix begins another's
    # (the Lambda refuses a cluster_name with '/' too).
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$", var.cluster_name))
    error_message = "cluster_name must be 1 to 40 characters: letters, digits, '-' and '_', starting with a letter or digit."
  }
}

variable "namespace" {
  description = "CloudWatch namespace the shippers publish to and the Lambda reads from and writes to (the shipper's `namespace` key). Default (null): \"Slurm/<cluster_name>\", the shipper's default too. The instance policy and the Lambda may put metric data in this namespace only, so one per cluster keeps each cluster's nodes out of the others' figures, alarms and autoscaling events; \"Slurm\" keeps the namespace older versions shared (see docs/deploying.md, \"Moving an existing cluster\")."
  type        = string
  default     = null

  validation {
    # try(): with a null namespace the functions fail, and || does not stop at its left side.
    condition     = var.namespace == null || try(can(regex("^[A-Za-z0-9.#:_/ -]{1,255}$", var.namespace)) && !startswith(var.namespace, "AWS/") && !startswith(var.namespace, ":"), false)
    error_message = "namespace must be 1 to 255 characters of letters, digits, spaces and . # : _ / -, and must start neither with \"AWS/\" (reserved for AWS services) nor with \":\"."
  }
}

variable "lambda_zip_path" {
  description = "Path of the Lambda deployment package: a zip holding the `bootstrap` binary built from lambda/ for x86_64 (provided.al2023)."
  type        = string

  validation {
    condition     = endswith(lower(var.lambda_zip_path), ".zip")
    error_message = "lambda_zip_path must name a .zip file."
  }
}

variable "function_name" {
  description = "Name of the Lambda function. Default: \"slurm-cw-<cluster_name>\"."
  type        = string
  default     = null

  validation {
    condition     = var.function_name == null || can(regex("^[A-Za-z0-9_-]{1,64}$", var.function_name))
    error_message = "function_name must be 1 to 64 characters: letters, digits, '-' and '_'."
  }
}

variable "lambda_memory_size" {
  description = "Memory of the Lambda in MB (it also sets its share of CPU)."
  type        = number
  default     = 256

  validation {
    condition     = var.lambda_memory_size >= 128 && var.lambda_memory_size <= 10240 && floor(var.lambda_memory_size) == var.lambda_memory_size
    error_message = "lambda_memory_size must be a whole number of MB from 128 to 10240."
  }
}

variable "lambda_timeout" {
  description = "Timeout of one Lambda run in seconds. Keep it at or under the schedule's period: a longer run overlaps the next one (or, with lambda_reserved_concurrency = 1, delays it)."
  type        = number
  default     = 60

  validation {
    condition     = var.lambda_timeout >= 1 && var.lambda_timeout <= 900 && floor(var.lambda_timeout) == var.lambda_timeout
    error_message = "lambda_timeout must be a whole number of seconds from 1 to 900."
  }
}

variable "lambda_reserved_concurrency" {
  description = "Reserved concurrency of the Lambda. null (default): none, because accounts with a concurrency quota of 10 cannot reserve any. 1 makes it a singleton, so that a run that overruns the schedule's period never overlaps the next; set it where the account's quota allows."
  type        = number
  default     = null

  validation {
    # try(): a null operand would be an error, not false.
    condition     = var.lambda_reserved_concurrency == null || try(var.lambda_reserved_concurrency >= 1 && floor(var.lambda_reserved_concurrency) == var.lambda_reserved_concurrency, false)
    error_message = "lambda_reserved_concurrency must be null (unreserved) or a whole number of at least 1 (0 would stop the function)."
  }
}

variable "log_retention_days" {
  description = "Retention of the Lambda's log group (/aws/lambda/<function_name>) in days."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of CloudWatch Logs' retention values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "job_log_retention_days" {
  description = "Retention of the job log group (/slurm-cw/<cluster_name>/jobs: the nodes' job records and the Lambda's findings cursor) in days."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.job_log_retention_days)
    error_message = "job_log_retention_days must be one of CloudWatch Logs' retention values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "emf_log_retention_days" {
  description = "Retention of the emf destination's log group (/slurm-cw/<cluster_name>/metrics) in days: CloudWatch extracts the metrics when the events arrive, so a day is enough."
  type        = number
  default     = 1

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.emf_log_retention_days)
    error_message = "emf_log_retention_days must be one of CloudWatch Logs' retention values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "shipper_flush_minutes" {
  description = "The nodes' flush_interval in the shipper's configuration, in whole minutes (the shipper's default is 120s: 2). The Lambda derives a minute's cluster figures once every node has flushed it: this many minutes and two more after it."
  type        = number
  default     = 2

  validation {
    condition     = var.shipper_flush_minutes >= 1 && var.shipper_flush_minutes <= 60 && floor(var.shipper_flush_minutes) == var.shipper_flush_minutes
    error_message = "shipper_flush_minutes must be a whole number of minutes from 1 to 60."
  }
}

variable "every_minutes" {
  description = "Minutes between the Lambda's runs (its EventBridge schedule). Each run derives every minute since the last, so the figures are the same as with a run a minute; GetMetricData is billed per series read, so five minutes costs a fifth of one (docs/cost.md). Backlog events and findings come up to this many minutes later."
  type        = number
  default     = 5

  validation {
    condition     = var.every_minutes >= 1 && var.every_minutes <= 60 && floor(var.every_minutes) == var.every_minutes
    error_message = "every_minutes must be a whole number of minutes from 1 to 60."
  }
}

variable "event_bus_name" {
  description = "Name (not ARN) of the EventBridge event bus the Lambda sends its notices to (events:PutEvents is allowed on this bus only)."
  type        = string
  default     = "default"

  validation {
    condition     = can(regex("^[A-Za-z0-9._/-]{1,256}$", var.event_bus_name))
    error_message = "event_bus_name must be an event bus name (letters, digits, . _ / -), not an ARN."
  }
}

variable "alarm_rules" {
  description = "The alarm rules the Lambda keeps in shape, as the list the Lambda reads (see rules/default-rules.json, generated from the metric catalog). null: use rules/default-rules.json."
  type        = any
  default     = null

  validation {
    condition     = var.alarm_rules == null || can(length(var.alarm_rules))
    error_message = "alarm_rules must be a list of rule objects, or null for the module's default rules."
  }
}

variable "thresholds" {
  description = "Thresholds of the Lambda's derived alarms and notices. Each attribute is optional; missing ones take the default shown."
  type = object({
    idle_gpu_percent              = optional(number, 5)  # a job's GPU utilisation under this ...
    idle_gpu_minutes              = optional(number, 30) # ... for this long is idle
    low_cpu_efficiency_percent    = optional(number, 20) # CPU time used / CPU time allocated under this ...
    low_cpu_minutes               = optional(number, 60) # ... for this long is inefficient
    memory_over_requested_percent = optional(number, 25) # memory requested but unused beyond this share
    backlog_change_nodes          = optional(number, 1)  # smallest change of the autoscaling signal worth a notice
  })
  default = {}

  validation {
    condition = alltrue([
      for p in [var.thresholds.idle_gpu_percent, var.thresholds.low_cpu_efficiency_percent, var.thresholds.memory_over_requested_percent] :
      p >= 0 && p <= 100
    ])
    error_message = "thresholds: idle_gpu_percent, low_cpu_efficiency_percent and memory_over_requested_percent must be from 0 to 100."
  }

  validation {
    condition     = var.thresholds.idle_gpu_minutes >= 1 && var.thresholds.low_cpu_minutes >= 1 && var.thresholds.backlog_change_nodes >= 0
    error_message = "thresholds: idle_gpu_minutes and low_cpu_minutes must be at least 1, backlog_change_nodes at least 0."
  }
}

variable "alarm_emails" {
  description = "E-mail addresses subscribed to the alarm and notice topic. Each must confirm its subscription."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for e in var.alarm_emails : can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", e))])
    error_message = "alarm_emails must hold e-mail addresses."
  }
}

variable "kms_key_deletion_window_in_days" {
  description = "Waiting period before the module's KMS key (SNS topic, dead-letter queue, logs, Lambda environment) is deleted after a destroy."
  type        = number
  default     = 30

  validation {
    condition     = var.kms_key_deletion_window_in_days >= 7 && var.kms_key_deletion_window_in_days <= 30
    error_message = "kms_key_deletion_window_in_days must be from 7 to 30."
  }
}

variable "role_permissions_boundary" {
  description = "ARN of an IAM permissions boundary for the module's roles (the Lambda's, and the nodes' where create_instance_profile), where the account requires one. null: none."
  type        = string
  default     = null
}

variable "iam_path" {
  description = "IAM path of the Lambda's role and of the module's IAM policies (cluster instance, job report reader)."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([\\x21-\\x7e]+/)?$", var.iam_path))
    error_message = "iam_path must begin and end with '/'."
  }
}

variable "tags" {
  description = "Tags applied to every taggable resource of the module."
  type        = map(string)
  default     = {}
}

# --- AWS PCS -----------------------------------------------------------------------------------

variable "pcs_scaling_log_group" {
  description = "AWS PCS only: the CloudWatch Logs group PCS delivers the cluster's scaling logs (PCS_SCALING_LOGS) to. The Lambda reads each node launch failure and its reason from it (logs:FilterLogEvents on this group alone) and sends it to EventBridge beside the backlog events; the dashboard shows the failures. null (default): no PCS stage, as before. The group is yours (PCS delivers to it: infra/pcs/README.md)."
  type        = string
  default     = null

  validation {
    condition     = var.pcs_scaling_log_group == null || try(can(regex("^[A-Za-z0-9_./#-]{1,512}$", var.pcs_scaling_log_group)), false)
    error_message = "pcs_scaling_log_group must be a log group name: 1 to 512 of letters, digits and _ . / # -."
  }
}

variable "pcs_cluster_id" {
  description = "AWS PCS only, required with pcs_scaling_log_group: the cluster's PCS id (pcs_...). The Lambda sends only the launch failures whose resource_id is this id; another cluster's records delivered to the same group are counted and skipped."
  type        = string
  default     = null

  validation {
    condition     = var.pcs_cluster_id == null || try(can(regex("^[A-Za-z0-9_-]{1,64}$", var.pcs_cluster_id)), false)
    error_message = "pcs_cluster_id must be a PCS cluster id (pcs_...): 1 to 64 of letters, digits, _ and -."
  }
}

variable "pcs_jobcomp_log_group" {
  description = "AWS PCS only: the CloudWatch Logs group PCS delivers the cluster's job completion logs (PCS_JOBCOMP_LOGS: each job's state, times, nodes, instance ids and types) to. The dashboard shows the newest records from it. null (default): no such widget."
  type        = string
  default     = null

  validation {
    condition     = var.pcs_jobcomp_log_group == null || try(can(regex("^[A-Za-z0-9_./#-]{1,512}$", var.pcs_jobcomp_log_group)), false)
    error_message = "pcs_jobcomp_log_group must be a log group name: 1 to 512 of letters, digits and _ . / # -."
  }
}

variable "create_instance_profile" {
  description = "Create an IAM role and instance profile for the cluster's nodes, slurm-cw-<cluster_name>-node: the cluster instance policy attached, pcs:RegisterComputeNodeGroupInstance (which AWS PCS requires of a node group's role), and instance_role_policy_arns. For AWS PCS launch templates; ParallelCluster makes its own roles (give it cluster_instance_policy_arn instead). false (default): none, as before."
  type        = bool
  default     = false
}

variable "instance_profile_path" {
  description = "IAM path of the nodes' role and instance profile (create_instance_profile). AWS PCS accepts a node group's instance profile only when its role sits under the path \"/aws-pcs/\" or is named AWSPCS...: set \"/aws-pcs/\" for PCS. Default \"/\", the module's other IAM objects' default."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([\\x21-\\x7e]+/)?$", var.instance_profile_path))
    error_message = "instance_profile_path must begin and end with '/' (\"/aws-pcs/\" for AWS PCS)."
  }
}

variable "instance_role_policy_arns" {
  description = "Further managed policies for the nodes' role (create_instance_profile), such as arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore for Session Manager, or a policy to read the release from your bucket."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.instance_role_policy_arns : can(regex("^arn:[a-z-]+:iam::(aws|[0-9]{12}):policy/", a))])
    error_message = "instance_role_policy_arns must hold IAM policy ARNs."
  }
}

variable "account_budgets" {
  description = "Monthly budgets in US dollars by Slurm account ({ physics = 5000 }): the Lambda sends an EventBridge event (\"Slurm Account Budget Threshold Crossed\") and a notice to the alarm topic when an account's JobCost this month (UTC) passes 80 % and 100 %, once each a month, naming its costliest jobs. {} (default): no budgets."
  type        = map(number)
  default     = {}
  validation {
    condition     = alltrue([for v in values(var.account_budgets) : v > 0])
    error_message = "account_budgets: every budget must be above 0 dollars."
  }
}

variable "job_cost_price_lookup" {
  description = "Let the instances look up their own price for job costs (slurm-cw-shipper's [cost] section): ec2:DescribeSpotPriceHistory on Spot instances, pricing:GetProducts for the On-Demand price (statement LookUpNodePrices). false: admins who configure cost.hourly_price or cost.prices need neither."
  type        = bool
  default     = true
}

variable "otlp_metrics" {
  description = "Let the instances send to CloudWatch's OTLP endpoint (the shipper's `otlp` destination, https://monitoring.<region>.amazonaws.com/v1/metrics): the cluster instance policy gains cloudwatch:PutMetricData for requests that carry no cloudwatch:namespace key (OTLP has no namespace); classic PutMetricData stays confined to the cluster's namespace. Whether OTLP requests lack that key is not verified against AWS: if they carry it, this grants nothing and the destination gets 403. false (default): CloudWatch's OTLP endpoint refuses the instances."
  type        = bool
  default     = false
}
