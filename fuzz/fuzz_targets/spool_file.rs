#![no_main]
//! A spool file, as a power loss or a bad disk may leave it: an error, never a panic, and
//! anything accepted encodes back to a file that decodes the same.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::spool;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = spool::decode(data) {
        if batch.datums.iter().all(|d| d.value.numbers().iter().all(|x| x.is_finite())) {
            let again = spool::decode(&spool::encode(&batch.namespace, &batch.datums));
            assert_eq!(again.as_ref(), Ok(&batch));
        }
    }
});
