#![no_main]
//! A spool file, as a power loss or a bad disk may leave it: an error, never a panic, and
//! anything accepted encodes back to a file that decodes the same.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::datum::Datum;
use slurm_cw_formats::record::Record;
use slurm_cw_formats::spool;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = spool::decode::<Datum>(data) {
        if batch.items.iter().all(|d| d.value.numbers().iter().all(|x| x.is_finite())) {
            let again = spool::decode(&spool::encode(&batch.label, &batch.items));
            assert_eq!(again.as_ref(), Ok(&batch));
        }
    }
    if let Ok(batch) = spool::decode::<Record>(data) {
        let again = spool::decode(&spool::encode(&batch.label, &batch.items));
        assert_eq!(again.as_ref(), Ok(&batch));
    }
});
