//! RDMA port counters in sysfs (`/sys/class/infiniband/<device>/ports/<port>/`): the
//! InfiniBand PMA counters in `counters/` (kernel Documentation/ABI/stable/sysfs-class-infiniband)
//! and the hardware counters an EFA (Elastic Fabric Adapter) port keeps in `hw_counters/` (the
//! efa driver's port statistics). Every file holds one decimal number; the collector reads the
//! files named here and hands their text in.

/// Which counter files a port has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterSet {
    /// `counters/`: PMA PortCounters(Extended). `*_data` count 4-octet words.
    Infiniband,
    /// `hw_counters/` of the efa driver: bytes and packets as they are.
    Efa,
}

/// InfiniBand `*_data` counters count octets divided by 4 (lanes).
pub const IB_DATA_UNIT: u64 = 4;

/// InfiniBand error counters, added up as a port's errors (the documented
/// `port_rcv_contraint_errors` misspelling included, should a kernel name it so).
pub const IB_ERRORS: &[&str] = &[
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "link_error_recovery",
    "link_downed",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "port_rcv_contraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
];

/// EFA port counters that count drops and failed work requests.
pub const EFA_ERRORS: &[&str] = &["rx_drops", "rdma_read_wr_err", "rdma_write_wr_err"];

const IB_TRAFFIC: [&str; 4] = ["port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets"];
const EFA_TRAFFIC: [&str; 4] = ["rx_bytes", "tx_bytes", "rx_pkts", "tx_pkts"];
const EFA_EXTRA: [&str; 3] = ["rdma_read_bytes", "rdma_write_bytes", "retrans_pkts"];

/// The file names the shipper reads in a port's counter directory.
pub fn wanted(set: CounterSet) -> Vec<&'static str> {
    match set {
        CounterSet::Infiniband => IB_TRAFFIC.iter().chain(IB_ERRORS).copied().collect(),
        CounterSet::Efa => EFA_TRAFFIC.iter().chain(&EFA_EXTRA).chain(EFA_ERRORS).copied().collect(),
    }
}

/// A counter file's value; None when it is not one unsigned number.
pub fn counter(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// What the shipper takes of one port: totals since the counters last started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortTotals {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// EFA only.
    pub rdma_read_bytes: Option<u64>,
    /// EFA devices with RDMA write only.
    pub rdma_write_bytes: Option<u64>,
    /// Drops and errors, all kinds added up.
    pub errors: u64,
    /// EFA drivers that count retransmissions.
    pub retransmitted_packets: Option<u64>,
}

/// A port's totals from its counter files (name, text). None when a traffic counter (bytes
/// and packets each way) is missing or not a number: not a port this parser knows. An error
/// or optional counter that is missing or unreadable is left out.
pub fn port_totals(set: CounterSet, files: &[(&str, &str)]) -> Option<PortTotals> {
    let get = |name: &str| files.iter().find(|(n, _)| *n == name).and_then(|(_, t)| counter(t));
    let (traffic, errors): (&[&str; 4], &[&str]) = match set {
        CounterSet::Infiniband => (&IB_TRAFFIC, IB_ERRORS),
        CounterSet::Efa => (&EFA_TRAFFIC, EFA_ERRORS),
    };
    let [rx, tx, rxp, txp] = traffic.map(get);
    let unit = if set == CounterSet::Infiniband { IB_DATA_UNIT } else { 1 };
    let errors = errors.iter().filter_map(|n| get(n)).fold(0u64, u64::saturating_add);
    let efa = set == CounterSet::Efa;
    Some(PortTotals {
        rx_bytes: rx?.saturating_mul(unit),
        tx_bytes: tx?.saturating_mul(unit),
        rx_packets: rxp?,
        tx_packets: txp?,
        rdma_read_bytes: get("rdma_read_bytes").filter(|_| efa),
        rdma_write_bytes: get("rdma_write_bytes").filter(|_| efa),
        errors,
        retransmitted_packets: get("retrans_pkts").filter(|_| efa),
    })
}

/// What a port counted between two readings, and whether its counters went back (a driver
/// reload, a device reset): then the figures are what it counted since, from zero, never a
/// negative or wrapped-around number. These are 64-bit counters; going back is a reset, not a
/// wrap.
pub fn since(before: &PortTotals, now: &PortTotals) -> (PortTotals, bool) {
    // Outer None: no figure (the counter is not in both readings); Some(None): it went back.
    let opt = |b: Option<u64>, n: Option<u64>| Some(n?.checked_sub(b?));
    let plain = [
        now.rx_bytes.checked_sub(before.rx_bytes),
        now.tx_bytes.checked_sub(before.tx_bytes),
        now.rx_packets.checked_sub(before.rx_packets),
        now.tx_packets.checked_sub(before.tx_packets),
        now.errors.checked_sub(before.errors),
    ];
    let optional = [
        opt(before.rdma_read_bytes, now.rdma_read_bytes),
        opt(before.rdma_write_bytes, now.rdma_write_bytes),
        opt(before.retransmitted_packets, now.retransmitted_packets),
    ];
    let reset = plain.iter().any(Option::is_none) || optional.iter().any(|o| matches!(o, Some(None)));
    if reset {
        return (*now, true);
    }
    let [rx, tx, rxp, txp, errors] = plain.map(|d| d.unwrap_or(0));
    let [rdma_read, rdma_write, retrans] = optional.map(|o| o.flatten());
    let d = PortTotals {
        rx_bytes: rx,
        tx_bytes: tx,
        rx_packets: rxp,
        tx_packets: txp,
        rdma_read_bytes: rdma_read,
        rdma_write_bytes: rdma_write,
        errors,
        retransmitted_packets: retrans,
    };
    (d, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infiniband_data_counts_four_octet_words() {
        let files = [
            ("port_rcv_data", "250\n"),
            ("port_xmit_data", "100\n"),
            ("port_rcv_packets", "7\n"),
            ("port_xmit_packets", "3\n"),
            ("symbol_error", "1\n"),
            ("port_rcv_errors", "2\n"),
            ("link_downed", "garbage\n"),
        ];
        let t = port_totals(CounterSet::Infiniband, &files).unwrap();
        assert_eq!((t.rx_bytes, t.tx_bytes, t.rx_packets, t.tx_packets), (1000, 400, 7, 3));
        assert_eq!(t.errors, 3, "an unreadable error counter is left out");
        assert_eq!(t.rdma_read_bytes, None);
    }

    #[test]
    fn efa_counters_and_a_port_without_traffic_counters() {
        let files = [
            ("rx_bytes", "10"),
            ("tx_bytes", "20"),
            ("rx_pkts", "1"),
            ("tx_pkts", "2"),
            ("rdma_read_bytes", "5"),
            ("rx_drops", "4"),
            ("rdma_read_wr_err", "1"),
        ];
        let t = port_totals(CounterSet::Efa, &files).unwrap();
        assert_eq!((t.rx_bytes, t.tx_bytes, t.errors), (10, 20, 5));
        assert_eq!((t.rdma_read_bytes, t.rdma_write_bytes, t.retransmitted_packets), (Some(5), None, None));
        assert_eq!(port_totals(CounterSet::Efa, &files[1..]), None);
        assert_eq!(port_totals(CounterSet::Infiniband, &files), None);
    }

    #[test]
    fn a_counter_going_back_is_a_reset_never_a_negative_or_huge_delta() {
        let a = PortTotals { rx_bytes: 100, tx_bytes: 100, rdma_read_bytes: Some(50), ..Default::default() };
        let b = PortTotals { rx_bytes: 160, tx_bytes: 130, rdma_read_bytes: Some(70), ..Default::default() };
        let (d, reset) = since(&a, &b);
        assert!(!reset);
        assert_eq!((d.rx_bytes, d.tx_bytes, d.rdma_read_bytes), (60, 30, Some(20)));
        let after_reload =
            PortTotals { rx_bytes: 10, tx_bytes: 5, rdma_read_bytes: Some(1), ..Default::default() };
        let (d, reset) = since(&b, &after_reload);
        assert!(reset);
        assert_eq!(d, after_reload);
        assert_eq!(counter(" 18446744073709551615\n"), Some(u64::MAX));
        assert_eq!(counter("-1"), None);
    }
}
