terraform {
  # 1.5: optional() attributes with defaults, lifecycle preconditions, check blocks.
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.x and 6.x: the module uses nothing 6.x removed or deprecated (data.aws_region's `id`,
      # not `name`); tests/infra/test_terraform.py checks the names it must not use.
      version = ">= 5.0, < 7.0"
    }
  }
}
