//! `scalwsd translate` as a user runs it: manifests in files and directories
//! -> the configuration on stdout (which `--check` accepts and `--config`
//! serves), status lines on stderr, certificates written, exit codes.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Output};

use support::cluster::{echo, get, seen, service};
use support::process::{Scalwsd, free_addrs};

const BIN: &str = env!("CARGO_BIN_EXE_scalwsd");

fn scalwsd(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[tokio::test]
async fn translated_manifests_check_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    let backend = echo("apps", "web").await;
    let ca = test_support::tls::TestCa::new();
    let (cert, key) = ca.issue_pem(&["shop.example"]);
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(manifests.join("nested")).unwrap();
    std::fs::write(
        manifests.join("gateway.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: scalws }\nspec: { controllerName: scalws.io/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: web, namespace: apps }
spec:
  gatewayClassName: scalws
  listeners:
    - { name: http, port: 80, protocol: HTTP }
    - { name: https, port: 443, protocol: HTTPS, hostname: shop.example, tls: { certificateRefs: [{ name: shop-tls }] } }
---
apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: { name: shop, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  hostnames: [shop.example]
  rules:
    - { matches: [{ path: { type: PathPrefix, value: /old } }], filters: [{ type: RequestRedirect, requestRedirect: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /new } } }] }
    - { backendRefs: [{ name: web, port: 8080 }] }
    - { matches: [{ path: { type: PathPrefix, value: /missing } }], backendRefs: [{ name: nowhere, port: 8080 }] }
",
    )
    .unwrap();
    std::fs::write(
        manifests.join("nested/service.yml"),
        service("apps", "web", backend.addr),
    )
    .unwrap();
    // A List in JSON, with the Secret.
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "List",
        "items": [{
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": { "name": "shop-tls", "namespace": "apps" },
            "stringData": { "tls.crt": cert, "tls.key": key }
        }]
    });
    std::fs::write(manifests.join("secret.json"), secret.to_string()).unwrap();
    std::fs::write(manifests.join("README.txt"), "not a manifest").unwrap();

    let [http, https, admin] = free_addrs::<3>();
    let out = scalwsd(
        &[
            "translate",
            "--listen",
            &format!("80={http}"),
            "--listen",
            &format!("443={https}"),
            "--certs-dir",
            "tls",
            "manifests",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "translate failed: {stderr}");
    for line in [
        "GatewayClass scalws: Accepted=True",
        "Gateway apps/web: Programmed=True",
        "Gateway apps/web listener https: ResolvedRefs=True",
        "HTTPRoute apps/shop parent apps/web: Accepted=True",
        "HTTPRoute apps/shop parent apps/web: ResolvedRefs=False (BackendNotFound)",
        "Gateway apps/web listener http: attachedRoutes=1",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in\n{stderr}");
    }
    assert!(dir.path().join("tls/apps/shop-tls.crt").exists());
    let key_mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(dir.path().join("tls/apps/shop-tls.key"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(key_mode & 0o077, 0, "the key is readable by its owner only");

    let yaml = String::from_utf8(out.stdout).unwrap();
    let file = dir.path().join("translated.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let check = scalwsd(&["--check", "--config", file.to_str().unwrap()], dir.path());
    assert!(
        check.status.success(),
        "--check refused it: {}\n{yaml}",
        String::from_utf8_lossy(&check.stderr)
    );

    let served_dir = tempfile::tempdir().unwrap();
    let yaml = format!("admin: {admin}\n{yaml}");
    let server = Scalwsd::start(served_dir, &yaml, http, Some(admin), 1).await;
    let reply = get(http, "shop.example", "/products?id=1").await;
    assert_eq!(reply.backend(), Some("web"), "{:?}", reply.reply);
    assert_eq!(reply.saw("path"), Some("/products?id=1"));
    let redirect = get(http, "shop.example", "/old/a").await;
    assert_eq!(redirect.status(), 302);
    assert_eq!(
        redirect.reply.header("location"),
        Some("http://shop.example/new/a"),
        "the port clients use (80), not the bound one"
    );
    assert_eq!(get(http, "shop.example", "/missing").await.status(), 500);
    assert_eq!(get(http, "other.example", "/").await.status(), 404);
    let request = test_support::request("GET", "shop.example", "/")
        .body(Default::default())
        .unwrap();
    let tls = test_support::tls::https(
        ca.client_config(&[b"h2"]),
        https,
        "shop.example",
        true,
        request,
    )
    .await;
    assert_eq!(seen(tls.reply).backend(), Some("web"));
    drop(server);
}

#[test]
fn bad_manifests_exit_2_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "syntax.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: { name: [x\n",
            "syntax.yaml:3:",
        ),
        (
            "unknown.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: { name: s }\nspec:\n  selectr: { app: x }\n",
            "unknown.yaml:5:3: spec.selectr: unknown field \"selectr\"",
        ),
        (
            "type.yaml",
            "---\napiVersion: v1\nkind: Service\nmetadata: { name: s }\nspec:\n  ports: [{ port: eighty }]\n",
            "type.yaml:6:",
        ),
        (
            "filter.yaml",
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: { name: r }\nspec:\n  rules: [{ filters: [{ type: Teleport }] }]\n",
            "filter.yaml:5:",
        ),
        (
            "broken.json",
            "{\"apiVersion\": \"v1\",\n \"kind\": }",
            "broken.json:2:",
        ),
        (
            "old.yaml",
            "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: { name: i }\n",
            "old.yaml:1:1: Ingress extensions/v1beta1 is not supported (use networking.k8s.io/v1)",
        ),
    ];
    for (name, text, _) in &cases {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    for (name, _, want) in cases {
        let out = scalwsd(&["translate", name], dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.starts_with(want),
            "{name}: expected {want:?}, got {stderr}"
        );
        assert!(out.stdout.is_empty(), "{name}: nothing is printed");
    }
    let out = scalwsd(&["translate"], dir.path());
    assert_eq!(out.status.code(), Some(2), "no PATH");
    let out = scalwsd(&["translate", "does-not-exist.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("does-not-exist.yaml:0:0: cannot read the file")
    );
    std::fs::write(
        dir.path().join("nothing.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: { name: a }\n",
    )
    .unwrap();
    let out = scalwsd(&["translate", "nothing.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to serve"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_ports_bound_at_one_address_leave_the_second_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gw.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: scalws }\nspec: { controllerName: scalws.io/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: web, namespace: apps }
spec: { gatewayClassName: scalws, listeners: [{ name: http, port: 80, protocol: HTTP }, { name: clash, port: 8080, protocol: HTTP }] }
",
    )
    .unwrap();
    let [addr] = free_addrs::<1>();
    let out = scalwsd(
        &[
            "translate",
            "--listen",
            &format!("80={addr}"),
            "--listen",
            &format!("8080={addr}"),
            "gw.yaml",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Gateway apps/web listener clash: Accepted=False (PortUnavailable): port 8080 is not served: address"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Gateway apps/web listener http: Programmed=True"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Gateway apps/web: Accepted=True (ListenersNotValid)"),
        "{stderr}"
    );
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(
        yaml.contains("http-80") && !yaml.contains("http-8080"),
        "{yaml}"
    );
}
