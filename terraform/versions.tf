terraform {
  # 1.5: optional() attributes with defaults, lifecycle preconditions, check blocks.
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}
