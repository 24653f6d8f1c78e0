use super::*;

const TEXT_2205: &str = "\
*******************************************************
sdiag output at Sat Nov 21 19:34:15 2026 (1795289655)
Data since      Sat Nov 21 19:34:15 2026 (1795289655)
*******************************************************
Server thread count:  3
Agent queue size:     1
Agent count:          2
Agent thread count:   4
DBD Agent queue size: 5

Jobs submitted: 10
Jobs started:   9
Jobs completed: 7
Jobs canceled:  1
Jobs failed:    2

Job states ts:  Sat Nov 21 19:34:15 2026 (1795289655)
Jobs pending:   3
Jobs running:   4

Main schedule statistics (microseconds):
\tLast cycle:   111
\tMax cycle:    222
\tTotal cycles: 33
\tMean cycle:   44
\tMean depth cycle:  5
\tCycles per minute: 6
\tLast queue length: 7

Backfilling stats
\tTotal backfilled jobs (since last slurm start): 8
\tTotal backfilled jobs (since last stats cycle start): 9
\tTotal backfilled heterogeneous job components: 0
\tTotal cycles: 10
\tLast cycle when: Sat Nov 21 19:34:10 2026 (1795289650)
\tLast cycle: 1100
\tMax cycle:  1200
\tMean cycle: 1300
\tLast depth cycle: 14
\tLast depth cycle (try sched): 15
\tDepth Mean: 16
\tDepth Mean (try depth): 17
\tLast queue length: 18
\tQueue length mean: 19
\tLast table size: 20
\tMean table size: 21

Latency for 1000 calls to gettimeofday(): 29 microseconds

Remote Procedure Call statistics by message type
\tMESSAGE_NODE_REGISTRATION_STATUS        ( 1002) count:4      ave_time:1026   total_time:4104
\tREQUEST_PARTITION_INFO                  ( 2009) count:1      ave_time:315    total_time:315
\tREQUEST_NODE_INFO                       ( 2007) count:12     ave_time:456    total_time:5472

Remote Procedure Call statistics by user
\troot            (       0) count:6      ave_time:812    total_time:4875

Pending RPC statistics
\tNo pending RPCs
";

#[test]
fn same_labels_in_different_sections_feed_different_metrics() {
    let s = parse_text(TEXT_2205).unwrap();
    assert_eq!(s.get(&MAIN_SCHED_LAST_CYCLE), Some(111.0));
    assert_eq!(s.get(&BACKFILL_LAST_CYCLE), Some(1100.0));
    assert_eq!(s.get(&MAIN_SCHED_TOTAL_CYCLES), Some(33.0));
    assert_eq!(s.get(&BACKFILL_TOTAL_CYCLES), Some(10.0));
    assert_eq!(s.get(&MAIN_SCHED_LAST_QUEUE_LENGTH), Some(7.0));
    assert_eq!(s.get(&BACKFILL_QUEUE_LENGTH), Some(18.0));
    assert_eq!(s.get(&BACKFILL_DEPTH_MEAN_TRY), Some(17.0));
    assert_eq!(s.get(&JOBS_FAILED), Some(2.0));
    assert_eq!(s.get(&DBD_AGENT_QUEUE_SIZE), Some(5.0));
    assert_eq!(s.values.len(), HEADER.len() + MAIN.len() + BACKFILL.len(), "every field");
    assert_eq!(s.rpcs.len(), 3);
    assert_eq!(s.pending_rpcs, Some(0));
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
}

#[test]
fn truncated_and_malformed_output() {
    assert_eq!(parse_text(""), Err(SdiagError::Empty));
    assert_eq!(
        parse_text("sdiag: error: Unable to contact slurm controller\n").unwrap_err(),
        SdiagError::Empty
    );
    let cut = &TEXT_2205[..TEXT_2205.find("Max cycle").unwrap()];
    let s = parse_text(cut).unwrap();
    assert_eq!(s.get(&MAIN_SCHED_LAST_CYCLE), Some(111.0));
    assert_eq!(s.get(&MAIN_SCHED_MAX_CYCLE), None);
    let odd = TEXT_2205
        .replace("Agent count:          2", "Agent count:          N/A")
        .replace("Jobs failed:    2", "Jobs frobbed:   2");
    let s = parse_text(&odd).unwrap();
    assert_eq!(s.get(&AGENT_COUNT), None);
    assert_eq!(s.unknown, vec!["Jobs frobbed".to_owned()]);
}

#[test]
fn pending_rpcs_are_summed() {
    let text = TEXT_2205.replace(
        "\tNo pending RPCs\n",
        "\tREQUEST_TERMINATE_JOB                   ( 6011) count:3\n\tREQUEST_LAUNCH_PROLOG                   ( 6017) count:2\n\nPending RPCs\n\t 1: REQUEST_TERMINATE_JOB                node01\n",
    );
    assert_eq!(parse_text(&text).unwrap().pending_rpcs, Some(5));
}

#[test]
fn json_numbers_plain_and_as_objects() {
    let j = r#"{"statistics": {"server_thread_count": 3, "jobs_submitted": {"set": true, "infinite": false, "number": 42},
        "schedule_cycle_mean": {"set": false, "infinite": false, "number": 0},
        "rpcs_by_message_type": [{"message_type": "REQUEST_PING", "type_id": 1008, "count": 5, "average_time": 2, "total_time": 10}],
        "pending_rpcs": [{"message_type": "REQUEST_TERMINATE_JOB", "type_id": 6011, "count": 2}]}}"#;
    let s = parse_json(j).unwrap();
    assert_eq!(s.get(&SERVER_THREAD_COUNT), Some(3.0));
    assert_eq!(s.get(&JOBS_SUBMITTED), Some(42.0));
    assert_eq!(s.get(&MAIN_SCHED_MEAN_CYCLE), None, "unset values are left out");
    assert_eq!(s.rpcs[0].total_time, 10);
    assert_eq!(s.pending_rpcs, Some(2));
    assert!(parse_json("{").is_err());
    assert!(parse_json("{}").is_err());
    assert_eq!(parse_json(r#"{"statistics": {}}"#), Err(SdiagError::Empty));
}

/// slurmctld's JSON dumps a mean over no cycle as 0 (data_parser's STATS_MSG_BF_CYCLE_MEAN
/// in 24.11: `else data_set_int(dst, 0)`) and cycles per minute as 0 before a minute of
/// data; text sdiag prints neither. Seen on the 24.11 bench: a head that read sdiag before
/// the backfill's first cycle shipped BackfillMeanCycle 0.
#[test]
fn json_means_over_no_cycle_are_left_out_as_text_leaves_them() {
    let j = |main: u32, bf: u32, span: u64| {
        format!(
            r#"{{"statistics": {{"req_time": {{"set": true, "infinite": false, "number": {}}},
            "req_time_start": {{"set": true, "infinite": false, "number": 1000}},
            "schedule_cycle_total": {main}, "schedule_cycle_mean": 0, "schedule_cycle_mean_depth": 0,
            "schedule_cycle_per_minute": 0, "bf_cycle_counter": {bf}, "bf_cycle_mean": 169,
            "bf_depth_mean": 0, "bf_depth_mean_try": 0, "bf_queue_len_mean": 0, "bf_cycle_last": 12}}}}"#,
            1000 + span
        )
    };
    let s = parse_json(&j(0, 0, 59)).unwrap();
    for m in [
        &MAIN_SCHED_MEAN_CYCLE,
        &MAIN_SCHED_MEAN_DEPTH,
        &MAIN_SCHED_CYCLES_PER_MINUTE,
        &BACKFILL_MEAN_CYCLE,
        &BACKFILL_DEPTH_MEAN,
        &BACKFILL_DEPTH_MEAN_TRY,
        &BACKFILL_QUEUE_LENGTH_MEAN,
    ] {
        assert_eq!(s.get(m), None, "{}", m.name);
    }
    assert_eq!(s.get(&BACKFILL_TOTAL_CYCLES), Some(0.0), "counts stay");
    assert_eq!(s.get(&BACKFILL_LAST_CYCLE), Some(12.0));
    let s = parse_json(&j(3, 2, 60)).unwrap();
    assert_eq!(s.get(&MAIN_SCHED_MEAN_CYCLE), Some(0.0), "a mean of cycles under a microsecond");
    assert_eq!(s.get(&MAIN_SCHED_CYCLES_PER_MINUTE), Some(0.0));
    assert_eq!(s.get(&BACKFILL_MEAN_CYCLE), Some(169.0));
    // Without its count (a version that named it otherwise), a mean is no mean either.
    let s = parse_json(r#"{"statistics": {"bf_cycle_mean": 169, "jobs_submitted": 1}}"#).unwrap();
    assert_eq!(s.get(&BACKFILL_MEAN_CYCLE), None);
}
