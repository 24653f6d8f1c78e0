//! The terminal's width, for `report`'s sparklines.

/// Columns of the terminal on standard output; None when it is not a terminal.
pub fn stdout_columns() -> Option<usize> {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we pass; fd 1 may be anything, and
    // a descriptor that is not a terminal makes it fail, which we check.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}
