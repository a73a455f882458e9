//! Placeholder: the helper writes ByteSize and Seconds here.
