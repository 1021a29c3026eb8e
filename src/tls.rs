//! TLS for the server: rustls configuration with a certificate resolver that reloads the
//! key pair from disk when it changes.
