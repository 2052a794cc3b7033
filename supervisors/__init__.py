"""OTP-style supervision and mailboxes for trio."""
