//! One credential provider per credential scope.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::sdk::credential::{CredentialProvider, CredentialScope, CredentialSource};
use crate::sdk::process::PerProcess;

/// The credential providers of one backend, one per [`CredentialScope`]: made on the first
/// lookup of a scope and reused for every later one, so whatever a provider builds (an SDK's
/// default chain, a parsed key file, a token client) is built once per scope and never shared
/// with another scope.
///
/// A backend keeps one in a field and answers
/// [`Backend::credential_source`](super::Backend::credential_source) with
/// [`PerScope::source`]:
///
/// ```
/// use std::sync::Arc;
/// use karu_engine::sdk::{
///     Credential, CredentialProvider, CredentialScope, Error, FetchContext, PerScope,
/// };
///
/// #[derive(Debug)]
/// struct TokenFile(String);
/// impl CredentialProvider for TokenFile {
///     fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
///         Ok(Credential::new(self.0.clone()))
///     }
/// }
///
/// let providers = PerScope::new();
/// let scope = CredentialScope::new("toy", Vec::new());
/// let first = providers.source(scope.clone(), || TokenFile("a".into()));
/// let again = providers.source(scope, || TokenFile("never made".into()));
/// assert!(Arc::ptr_eq(&first.provider, &again.provider));
/// assert_eq!(providers.len(), 1);
/// ```
///
/// The providers belong to the process that made them: in a forked child, the first lookup
/// starts afresh (a provider made in the parent may hold the parent's connections, and a
/// thread that is not in the child may hold this map's lock forever), and the parent's are
/// left alone.
pub struct PerScope<P> {
    providers: PerProcess<Mutex<HashMap<CredentialScope, Arc<P>>>>,
}

impl<P: CredentialProvider + 'static> PerScope<P> {
    /// No scope yet.
    pub fn new() -> Self {
        PerScope {
            providers: PerProcess::new(Mutex::new(HashMap::new())),
        }
    }

    /// The providers of the running process (a forked child's own, empty at first).
    fn providers(&self) -> &Mutex<HashMap<CredentialScope, Arc<P>>> {
        self.providers.get_or_init(|| Mutex::new(HashMap::new()))
    }

    /// The credential source of `scope`: its provider, made by `make` if the scope has none
    /// yet. `make` must not do input or output (it runs where the engine routes a read); a
    /// provider does its work in [`fetch`](CredentialProvider::fetch).
    pub fn source(&self, scope: CredentialScope, make: impl FnOnce() -> P) -> CredentialSource {
        let provider = {
            let mut providers = self.providers().lock();
            let provider = providers
                .entry(scope.clone())
                .or_insert_with(|| Arc::new(make()));
            Arc::clone(provider) as Arc<dyn CredentialProvider>
        };
        CredentialSource { scope, provider }
    }

    /// How many scopes have a provider.
    pub fn len(&self) -> usize {
        self.providers().lock().len()
    }

    /// Whether no scope has a provider yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<P: CredentialProvider + 'static> Default for PerScope<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> fmt::Debug for PerScope<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerScope")
            .field("scopes", &self.providers.get().map(|p| p.lock().len()))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::sdk::credential::{Credential, FetchContext};
    use crate::sdk::status::Error;

    #[derive(Debug)]
    struct Made(usize);
    impl CredentialProvider for Made {
        fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
            Ok(Credential::new(self.0))
        }
    }

    #[test]
    fn one_provider_per_scope() {
        let made = AtomicUsize::new(0);
        let make = || Made(made.fetch_add(1, Ordering::SeqCst));
        let providers = PerScope::new();
        assert!(providers.is_empty());
        let a = CredentialScope::new("aws", Vec::new());
        let b = CredentialScope::new("aws", Vec::new()).with_detail("profile=other");
        let a1 = providers.source(a.clone(), make);
        let a2 = providers.source(a.clone(), make);
        let b1 = providers.source(b.clone(), make);
        assert_eq!(made.load(Ordering::SeqCst), 2);
        assert!(Arc::ptr_eq(&a1.provider, &a2.provider));
        assert!(!Arc::ptr_eq(&a1.provider, &b1.provider));
        assert_eq!((&a1.scope, &b1.scope), (&a, &b));
        let ctx = FetchContext::new(None);
        let value = |s: &CredentialSource| *s.provider.fetch(&ctx).unwrap().get::<usize>().unwrap();
        assert_eq!((value(&a2), value(&b1)), (0, 1));
        assert_eq!(providers.len(), 2);
    }
}
