//! Karu's Azure Blob Storage and Data Lake Storage provider.

mod request;
