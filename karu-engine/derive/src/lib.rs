//! `#[derive(SectionKeys)]`: a provider's configuration section type declares, on its fields,
//! which keys are secrets and which choose a credential; the derive makes from that one
//! declaration the section's key lists (`karu_engine::sdk::SectionKeys`: every name a key is
//! read under, its serde `rename` and `alias`es included) and its `Debug`, which shows a secret
//! field as `<redacted>` (`karu_engine::sdk::redact::Concealed`). A list of secret keys kept
//! beside a hand-written `Debug` can drift; one attribute cannot.
//!
//! Field attributes: `#[karu(secret)]` (never quoted: `Debug`, configuration errors,
//! `karu config`), `#[karu(credential)]` (the credential scope is keyed on where it was set),
//! or both. Use it through `karu_engine::sdk::SectionKeys`; the generated code names
//! `::karu_engine`.

use proc_macro::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr, parse_macro_input};

/// Derive `karu_engine::sdk::SectionKeys` and `Debug` from the fields' `#[karu(...)]`
/// attributes (see the crate documentation).
#[proc_macro_derive(SectionKeys, attributes(karu))]
pub fn derive_section_keys(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// One field: its identifier, the names its key is read under, and its marks.
struct Field {
    ident: syn::Ident,
    names: Vec<String>,
    secret: bool,
    credential: bool,
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            input,
            "SectionKeys is derived for a struct with named fields",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new_spanned(
            input,
            "SectionKeys is derived for a struct with named fields",
        ));
    };
    let mut fields = Vec::new();
    for field in &named.named {
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        let mut names = vec![ident.to_string().trim_start_matches("r#").to_string()];
        let (mut secret, mut credential) = (false, false);
        for attr in &field.attrs {
            if attr.path().is_ident("serde") {
                attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("rename") {
                        names[0] = meta.value()?.parse::<LitStr>()?.value();
                    } else if meta.path.is_ident("alias") {
                        names.push(meta.value()?.parse::<LitStr>()?.value());
                    } else if meta.input.peek(syn::Token![=]) {
                        // Another `name = value` of serde's: not a name of the key.
                        let _: syn::Expr = meta.value()?.parse()?;
                    } else if meta.input.peek(syn::token::Paren) {
                        let content;
                        syn::parenthesized!(content in meta.input);
                        let _: proc_macro2::TokenStream = content.parse()?;
                    }
                    Ok(())
                })?;
            } else if attr.path().is_ident("karu") {
                attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("secret") {
                        secret = true;
                        Ok(())
                    } else if meta.path.is_ident("credential") {
                        credential = true;
                        Ok(())
                    } else {
                        Err(meta.error("expected `secret` or `credential`"))
                    }
                })?;
            }
        }
        fields.push(Field {
            ident,
            names,
            secret,
            credential,
        });
    }
    let name = &input.ident;
    let shown = name.to_string();
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    let debug_fields = fields.iter().map(|f| {
        let ident = &f.ident;
        let key = &f.names[0];
        if f.secret {
            quote! { .field(#key, &::karu_engine::sdk::redact::Concealed(&self.#ident)) }
        } else {
            quote! { .field(#key, &self.#ident) }
        }
    });
    let secret: Vec<&String> = fields
        .iter()
        .filter(|f| f.secret)
        .flat_map(|f| &f.names)
        .collect();
    let credential: Vec<&String> = fields
        .iter()
        .filter(|f| f.credential)
        .flat_map(|f| &f.names)
        .collect();
    Ok(quote! {
        impl #impl_generics ::core::fmt::Debug for #name #type_generics #where_clause {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(#shown)
                    #(#debug_fields)*
                    .finish_non_exhaustive()
            }
        }

        impl #impl_generics ::karu_engine::sdk::SectionKeys for #name #type_generics #where_clause {
            const SECRET: &'static [&'static str] = &[#(#secret),*];
            const CREDENTIAL: &'static [&'static str] = &[#(#credential),*];
        }
    })
}

/// This crate's README, whose example runs as a documentation test (private: a proc-macro
/// crate exports its macros only).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
#[allow(dead_code)]
struct Readme;
