//! Kubernetes: Ingress v1 and the Gateway API (HTTPRoute), translated into a
//! ScalWS configuration.
//!
//! One pure translation ([`translate()`]: [`Resources`] in, a [`Document`] and
//! the [`Status`] of every resource out) is used two ways: `scalwsd translate`
//! reads manifest files ([`manifests`]) and prints the configuration, and the
//! controller feeds it from the API server. `docs/kubernetes.md` says what is
//! supported.
//!
//! ```
//! use scalwsd::kubernetes::{manifests, translate, Options};
//!
//! let yaml = r#"
//! apiVersion: gateway.networking.k8s.io/v1
//! kind: GatewayClass
//! metadata: { name: scalws }
//! spec: { controllerName: scalws.io/gateway-controller }
//! ---
//! apiVersion: gateway.networking.k8s.io/v1
//! kind: Gateway
//! metadata: { name: web, namespace: default }
//! spec:
//!   gatewayClassName: scalws
//!   listeners: [{ name: http, port: 80, protocol: HTTP }]
//! "#;
//! let mut resources = Default::default();
//! manifests::read_str("inline.yaml", yaml, &mut resources).expect("valid manifests");
//! let translation = translate(&resources, &Options::default());
//! assert_eq!(translation.document.listeners[0].address, "0.0.0.0:10080");
//! assert!(translation.status.to_string().contains("Gateway default/web: Programmed=True"));
//! ```

mod backends;
pub mod check;
pub mod command;
pub mod controller;
pub mod document;
mod gateway;
mod hosts;
mod ingress;
pub mod manifests;
mod resources;
mod rules;
pub mod status;
mod translate;

pub use document::Document;
pub use resources::Resources;
pub use status::Status;
pub use translate::{
    Certificate, GATEWAY_CONTROLLER, INGRESS_CONTROLLER, Options, Translation, translate,
};
