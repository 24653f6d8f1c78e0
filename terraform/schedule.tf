# The schedule that runs the Lambda (scheduled rules live on the default event bus).

resource "aws_cloudwatch_event_rule" "schedule" {
  name                = "slurm-cw-${var.cluster_name}-schedule"
  description         = "Runs the slurm-cw Lambda of cluster ${var.cluster_name}"
  schedule_expression = var.every_minutes == 1 ? "rate(1 minute)" : "rate(${var.every_minutes} minutes)"
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "lambda" {
  rule = aws_cloudwatch_event_rule.schedule.name
  arn  = aws_lambda_function.this.arn
}

resource "aws_lambda_permission" "schedule" {
  statement_id  = "AllowScheduleFromEventBridge"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.this.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.schedule.arn
}
