"""Indexed CloudWatch storage for LocalStack 4.13.1, for benchmarks at cluster scale only.

Imported before localstack.runtime.main when scripts/bench/localstack.sh starts with
LOCALSTACK_INDEXED_CW=1; the tests always run LocalStack unchanged. Stock LocalStack answers
each GetMetricData query with one SQL sub-select per period, each reading every stored row of
that metric (dimensions are matched with LIKE '%Name=Value%', which no index can serve), and
commits PutMetricData one datum at a time. A Lambda run over 5,000 jobs would take days.

Four methods of CloudwatchDatabase are replaced, keeping their results:
1. get_metric_data_stat: one statement per query that buckets rows by period, with the exact
   dimension set (as real CloudWatch matches it) so that the index below serves it;
2. list_metrics: filters before it de-duplicates (stock unions both whole tables, on every
   page of the answer);
3. add_metric_data: one transaction per PutMetricData call;
4. __init__: an index on (account_id, region, namespace, metric_name, dimensions, timestamp).
Checked against the stock function on randomised queries (every stat, several periods, odd
windows, statistic sets, both scan orders) when the dimensions match exactly.
"""

import sqlite3
from datetime import UTC, datetime

from localstack.aws.api.cloudwatch import ScanBy
from localstack.services.cloudwatch import cloudwatch_database_helper as helper

Database = helper.CloudwatchDatabase
_stock_init = Database.__init__


def __init__(self):
    _stock_init(self)
    with self.DATABASE_LOCK, sqlite3.connect(self.METRICS_DB) as conn:
        for table in (self.TABLE_SINGLE_METRICS, self.TABLE_AGGREGATED_METRICS):
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS idx_{table.lower()}_series ON {table} "
                "(account_id, region, namespace, metric_name, dimensions, timestamp)"
            )
        conn.commit()


def get_metric_data_stat(self, account_id, region, query, start_time, end_time, scan_by):
    metric_stat = query.get("MetricStat")
    metric = metric_stat.get("Metric")
    period, stat, unit = metric_stat.get("Period"), metric_stat.get("Stat"), metric_stat.get("Unit")
    dimensions = metric.get("Dimensions", [])
    start = self._convert_timestamp_to_unix(start_time)
    end = self._convert_timestamp_to_unix(end_time)
    # Stock buckets: [start + k*period, start + (k+1)*period) for every bucket that starts before end.
    buckets = max(0, -(-(end - start) // period))
    stop = start + buckets * period
    params = [account_id, region, metric.get("Namespace"), metric.get("MetricName")]
    dimension_filter = "AND dimensions IS NULL"
    if dimensions:
        dimension_filter = "AND dimensions = ?"
        params.append(self._get_ordered_dimensions_with_separator(dimensions))
    unit_filter = ""
    if unit == "NULL_VALUE":
        unit_filter = "AND unit IS NULL"
    elif unit:
        unit_filter = "AND unit = ?"
        params.append(unit)
    params += [start, stop]
    where = (
        f"account_id = ? AND region = ? AND namespace = ? AND metric_name = ? {dimension_filter} "
        f"{unit_filter} AND timestamp >= ? AND timestamp < ?"
    )
    sql = f"""
        SELECT bucket, {helper.STAT_TO_SQLITE_AGGREGATION_FUNC[stat]}, SUM(count) FROM (
            SELECT CAST((timestamp - ?) / ? AS INTEGER) AS bucket, value, 1 AS count
            FROM {self.TABLE_SINGLE_METRICS} WHERE {where}
            UNION ALL
            SELECT CAST((timestamp - ?) / ? AS INTEGER) AS bucket,
                   {helper.STAT_TO_SQLITE_COL_NAME_HELPER[stat]} AS value, sample_count AS count
            FROM {self.TABLE_AGGREGATED_METRICS} WHERE {where}
        ) GROUP BY bucket ORDER BY bucket"""
    args = [start, period, *params, start, period, *params]
    with self.DATABASE_LOCK, sqlite3.connect(self.METRICS_DB_READ_ONLY, uri=True) as conn:
        rows = conn.execute(sql, args).fetchall()
    timestamps, values = [], []
    for bucket, value, count in rows:
        if count:
            timestamps.append(start + bucket * period)
            values.append(value / count if stat == "Average" else value)
    if scan_by is None or scan_by == ScanBy.TimestampDescending:
        timestamps, values = timestamps[::-1], values[::-1]
    return {"timestamps": timestamps, "values": values}


def list_metrics(self, account_id, region, namespace, metric_name, dimensions):
    params = [account_id, region]
    where = "account_id = ? AND region = ?"
    if namespace:
        where += " AND namespace = ?"
        params.append(namespace)
    if metric_name:
        where += " AND metric_name = ?"
        params.append(metric_name)
    if dimensions:
        where += " AND dimensions LIKE ?"
        params.append(self._get_ordered_dimensions_with_separator(dimensions, for_search=True))
    arm = "SELECT metric_name, namespace, dimensions, MAX(timestamp) AS last FROM {} WHERE {} GROUP BY 1, 2, 3"
    sql = f"""
        SELECT metric_name, namespace, dimensions FROM (
            {arm.format(self.TABLE_SINGLE_METRICS, where)}
            UNION ALL
            {arm.format(self.TABLE_AGGREGATED_METRICS, where)}
        ) GROUP BY 1, 2, 3 ORDER BY MAX(last) DESC, 1, 2, 3"""
    with self.DATABASE_LOCK, sqlite3.connect(self.METRICS_DB_READ_ONLY, uri=True) as conn:
        rows = conn.execute(sql, params + params).fetchall()
    return {
        "metrics": [
            {"metric_name": name, "namespace": ns, "dimensions": self._restore_dimensions_from_string(dims)}
            for name, ns, dims in rows
        ]
    }


def add_metric_data(self, account_id, region, namespace, metric_data):
    single, aggregated = [], []
    for metric in metric_data:
        if metric.get("Timestamp"):
            timestamp = self._convert_timestamp_to_unix(metric.get("Timestamp"))
        else:
            timestamp = int(datetime.now(UTC).timestamp())
        dimensions = self._get_ordered_dimensions_with_separator(metric.get("Dimensions"))
        row = (
            account_id,
            region,
            metric.get("MetricName"),
            namespace,
            timestamp,
            dimensions,
            metric.get("Unit"),
            metric.get("StorageResolution"),
        )
        if metric.get("Value") is not None:
            single.append(row + (metric.get("Value"),))
        elif metric.get("Values"):
            counts = metric.get("Counts", [1] * len(metric.get("Values")))
            for value, count in zip(metric.get("Values"), counts):
                single.extend([row + (value,)] * int(count))
        if statistics := metric.get("StatisticValues"):
            aggregated.append(
                row
                + (
                    statistics.get("SampleCount"),
                    statistics.get("Sum"),
                    statistics.get("Minimum"),
                    statistics.get("Maximum"),
                )
            )
    if not (single or aggregated):
        return
    with self.DATABASE_LOCK, sqlite3.connect(self.METRICS_DB) as conn:
        if single:
            conn.executemany(
                f"INSERT INTO {self.TABLE_SINGLE_METRICS} (account_id, region, metric_name, namespace, "
                "timestamp, dimensions, unit, storage_resolution, value) VALUES (?,?,?,?,?,?,?,?,?)",
                single,
            )
        if aggregated:
            conn.executemany(
                f"INSERT INTO {self.TABLE_AGGREGATED_METRICS} (account_id, region, metric_name, namespace, "
                "timestamp, dimensions, unit, storage_resolution, sample_count, sum, min, max) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                aggregated,
            )
        conn.commit()


Database.__init__ = __init__
Database.get_metric_data_stat = get_metric_data_stat
Database.list_metrics = list_metrics
Database.add_metric_data = add_metric_data
