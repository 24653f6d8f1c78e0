//! How glibc's allocator gives memory back.

/// Keeps freed memory for reuse instead of handing it back to the kernel after each flush.
/// By default glibc maps each allocation over 128 KiB afresh (a compressor's tables, a
/// request's body) and trims the heap's top whenever 128 KiB is free, so every flush paid for
/// mmap, munmap, brk and the page faults of touching the same memory again: about a tenth of
/// the daemon's CPU a cycle. With these thresholds the daemon's few MiB of working memory stay
/// mapped; what a large backlog takes is still returned past 8 MiB.
pub fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's tunables; it is called before any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 8 << 20);
        libc::mallopt(libc::M_TOP_PAD, 1 << 20);
    }
}
