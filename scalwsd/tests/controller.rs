//! `scalwsd --kubernetes` against a fake API server (test-support's `apiserver`)
//! that a real kube client talks to over HTTP on 127.0.0.1: the first list,
//! changes applied through the reload path, an EndpointSlice change with no
//! request failing, a relist after 410 Gone, an API server that answers 503
//! and one that does not answer at all, status written by the Lease holder only.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::cluster::{echo, get};
use support::process::{Scalwsd, free_addrs};
use test_support::apiserver::FakeApiServer;

const NS: &str = "apps";

fn base() -> String {
    "apiVersion: v1\nkind: Namespace\nmetadata: { name: apps }
---
apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: scalws }\nspec: { controllerName: scalws.io/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: web, namespace: apps }
spec: { gatewayClassName: scalws, listeners: [{ name: http, port: 80, protocol: HTTP }, { name: clash, port: 8080, protocol: HTTP }] }
---
apiVersion: v1\nkind: Service\nmetadata: { name: echo, namespace: apps }\nspec: { ports: [{ name: http, port: 8080 }] }
---
apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: { name: echo, namespace: apps }
spec: { parentRefs: [{ name: web }], hostnames: [echo.example], rules: [{ backendRefs: [{ name: echo, port: 8080 }] }] }
"
    .to_owned()
}

fn slice(ports: &[SocketAddr]) -> String {
    // One slice per endpoint, since each echo server has a port of its own.
    ports
        .iter()
        .enumerate()
        .map(|(i, a)| {
            format!(
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: echo-{i}, namespace: apps, labels: {{ kubernetes.io/service-name: echo }} }}\naddressType: IPv4\nports: [{{ name: http, port: {} }}]\nendpoints: [{{ addresses: [\"{}\"], conditions: {{ ready: true }} }}]\n",
                a.port(),
                a.ip()
            )
        })
        .collect()
}

async fn controller(
    api: &FakeApiServer,
    http: SocketAddr,
    admin: SocketAddr,
    pod: &str,
) -> Scalwsd {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let args: Vec<String> = [
        "--kubernetes",
        "--workers",
        "1",
        "--admin",
        &admin.to_string(),
        "--listen",
        &format!("80={http}"),
        // Gateway port 8080 goes to the admin listener's address: it must be
        // left out (and reported), not take the controller down.
        "--listen",
        &format!("8080={admin}"),
        "--publish",
        "192.0.2.10",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let envs = [
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("POD_NAME", pod.to_owned()),
        ("POD_NAMESPACE", "scalws-system".to_owned()),
        ("SCALWS_LOG", "info,kube=warn".to_owned()),
    ];
    Scalwsd::spawn(dir, &args, &envs, &[http, admin]).await
}

/// Waits (bounded) until `check` holds.
async fn eventually(what: &str, server: &Scalwsd, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what}: not within 20 s\n{}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn admin_text(admin: SocketAddr, path: &str) -> String {
    get(admin, "admin", path).await.reply.text().to_owned()
}

/// Whether the admin listener's `path` (`/healthz`, `/metrics`) says `text`.
async fn admin_says(admin: SocketAddr, path: &str, text: &str) -> bool {
    admin_text(admin, path).await.contains(text)
}

#[tokio::test]
async fn the_controller_follows_the_cluster() {
    let api = FakeApiServer::start().await;
    let one = echo(NS, "one").await;
    let two = echo(NS, "two").await;
    // A cluster without the v1beta1 ReferenceGrant API: read as empty.
    api.hide("/apis/gateway.networking.k8s.io/v1beta1");
    api.apply(&format!("{}{}", base(), slice(&[one.addr])));
    let [http, admin, http_b, admin_b] = free_addrs::<4>();
    let server = controller(&api, http, admin, "replica-a").await;

    let seen = get(http, "echo.example", "/x").await;
    assert_eq!(
        seen.backend(),
        Some("one"),
        "the first list is served: {:?}",
        seen.reply
    );
    assert_eq!(get(http, "other.example", "/").await.status(), 404);

    // Status, written by the Lease holder, with observedGeneration.
    eventually("status written", &server, async || {
        api.object("HTTPRoute", NS, "echo")
            .and_then(|r| r["status"]["parents"].get(0).cloned())
            .is_some_and(|p| {
                p["conditions"][0]["type"] == "Accepted" && p["conditions"][0]["status"] == "True"
            })
    })
    .await;
    let route = api.object("HTTPRoute", NS, "echo").unwrap();
    let parent = &route["status"]["parents"][0];
    assert_eq!(parent["controllerName"], "scalws.io/gateway-controller");
    assert_eq!(parent["parentRef"]["name"], "web");
    assert_eq!(parent["conditions"][0]["observedGeneration"], 1);
    let gateway = api.object("Gateway", NS, "web").unwrap();
    let programmed = gateway["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Programmed")
        .unwrap()
        .clone();
    assert_eq!(programmed["status"], "True");
    assert_eq!(
        gateway["status"]["addresses"][0],
        serde_json::json!({ "type": "IPAddress", "value": "192.0.2.10" })
    );
    assert_eq!(gateway["status"]["listeners"][0]["attachedRoutes"], 1);
    let clash = gateway["status"]["listeners"][1]["conditions"][0].clone();
    assert_eq!(
        (
            clash["type"].as_str(),
            clash["status"].as_str(),
            clash["reason"].as_str()
        ),
        (Some("Accepted"), Some("False"), Some("PortUnavailable")),
        "{clash}"
    );
    let accepted = gateway["status"]["conditions"][0].clone();
    assert_eq!(
        (accepted["status"].as_str(), accepted["reason"].as_str()),
        (Some("True"), Some("ListenersNotValid"))
    );
    let lease = api
        .object("Lease", "scalws-system", "scalws-controller")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a");
    assert!(
        admin_text(admin, "/healthz")
            .await
            .contains("kubernetes: in sync")
    );

    // A second replica serves too, but does not write status.
    let replica_b = controller(&api, http_b, admin_b, "replica-b").await;
    assert_eq!(
        get(http_b, "echo.example", "/").await.backend(),
        Some("one")
    );
    let metrics_b = admin_text(admin_b, "/metrics").await;
    assert!(
        metrics_b.contains("scalws_kubernetes_leader 0"),
        "{metrics_b}"
    );
    let metrics_a = admin_text(admin, "/metrics").await;
    assert!(
        metrics_a.contains("scalws_kubernetes_leader 1"),
        "{metrics_a}"
    );
    drop(replica_b);

    // A spec change: a new rule serves, and the generation is observed.
    api.apply(&base().replace(
        "rules: [{ backendRefs: [{ name: echo, port: 8080 }] }]",
        "rules: [{ backendRefs: [{ name: echo, port: 8080 }] }, { matches: [{ path: { type: PathPrefix, value: /teapot } }], filters: [{ type: RequestRedirect, requestRedirect: { hostname: tea.example } }] }]",
    ));
    eventually("the new rule serves", &server, async || {
        get(http, "echo.example", "/teapot").await.status() == 302
    })
    .await;
    eventually("generation 2 observed", &server, async || {
        api.object("HTTPRoute", NS, "echo")
            .is_some_and(|r| r["status"]["parents"][0]["conditions"][0]["observedGeneration"] == 2)
    })
    .await;

    // Status writes that fail are written again on a later round.
    let tried = |api: &FakeApiServer| {
        api.requests()
            .iter()
            .filter(|r| r.starts_with("PATCH"))
            .count()
    };
    let (tried_before, written_before) = (tried(&api), api.patches().len());
    api.fail_status_patches(3);
    api.apply(&base().replace(
        "rules: [{ backendRefs: [{ name: echo, port: 8080 }] }]",
        "rules: [{ backendRefs: [{ name: echo, port: 8080 }] }, { matches: [{ path: { type: PathPrefix, value: /kettle } }], filters: [{ type: RequestRedirect, requestRedirect: { hostname: tea.example } }] }]",
    ));
    eventually(
        "generation 3 observed after refused writes",
        &server,
        async || {
            api.object("HTTPRoute", NS, "echo").is_some_and(|r| {
                r["status"]["parents"][0]["conditions"][0]["observedGeneration"] == 3
            })
        },
    )
    .await;
    let written = api.patches().len() - written_before;
    assert!(
        written > 0 && tried(&api) - tried_before >= written + 3,
        "the three refused writes were tried, and written again: {written} written"
    );
    assert_eq!(get(http, "echo.example", "/kettle").await.status(), 302);

    // An EndpointSlice change, under load: no request fails, and the endpoint
    // that remains keeps its upstream connection.
    let load = tokio::spawn(async move {
        let mut answers = Vec::new();
        let until = Instant::now() + Duration::from_secs(4);
        while Instant::now() < until && answers.len() < 4000 {
            answers.push(get(http, "echo.example", "/load").await.status());
        }
        answers
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.apply(&slice(&[one.addr, two.addr]));
    eventually("both endpoints serve", &server, async || two.hits() > 0).await;
    let two_connections = two.connections();
    api.delete("EndpointSlice", NS, "echo-0");
    let before = one.hits();
    eventually("the removed endpoint gets nothing", &server, async || {
        let hits = one.hits();
        tokio::time::sleep(Duration::from_millis(400)).await;
        one.hits() == hits
    })
    .await;
    let answers = load.await.unwrap();
    assert!(
        !answers.is_empty() && answers.iter().all(|s| *s == 200),
        "every request during the change got 200: {:?}",
        answers.iter().filter(|s| **s != 200).count()
    );
    assert!(one.hits() >= before);
    assert_eq!(
        two.connections(),
        two_connections,
        "the endpoint that remained kept its connection"
    );

    // 410 Gone: the watches relist, and later changes still apply.
    let lists_before = api
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET") && !r.contains("watch="))
        .count();
    api.compact();
    eventually("relisted after 410", &server, async || {
        api.requests()
            .iter()
            .filter(|r| r.starts_with("GET") && !r.contains("watch="))
            .count()
            > lists_before + 5
    })
    .await;
    api.apply(&base().replace(
        "hostnames: [echo.example]",
        "hostnames: [echo.example, again.example]",
    ));
    eventually("a change after the relist serves", &server, async || {
        get(http, "again.example", "/").await.status() == 200
    })
    .await;

    // The API server goes away: the last good configuration serves on, and
    // health says it is out of sync; when it is back, in sync again.
    api.set_unreachable(true);
    eventually("out of sync", &server, async || {
        admin_says(admin, "/healthz", "out of sync").await
    })
    .await;
    assert_eq!(
        get(http, "again.example", "/").await.status(),
        200,
        "still serving"
    );
    assert!(
        admin_text(admin, "/metrics")
            .await
            .contains("scalws_kubernetes_in_sync 0")
    );
    api.set_unreachable(false);
    eventually("in sync again", &server, async || {
        admin_says(admin, "/healthz", "kubernetes: in sync").await
    })
    .await;

    // An API server that stops answering (no error, no answer, as behind a
    // dead connection): out of sync, and this replica stops counting itself
    // the leader before its claim lapses; when it answers, both come back.
    api.set_silent(true);
    eventually("out of sync while unanswered", &server, async || {
        admin_says(admin, "/healthz", "out of sync").await
    })
    .await;
    eventually("not the leader while unanswered", &server, async || {
        admin_says(admin, "/metrics", "scalws_kubernetes_leader 0").await
    })
    .await;
    assert_eq!(get(http, "again.example", "/").await.status(), 200);
    api.set_silent(false);
    eventually("in sync once answered", &server, async || {
        admin_says(admin, "/healthz", "kubernetes: in sync").await
    })
    .await;
    eventually("the leader again", &server, async || {
        admin_says(admin, "/metrics", "scalws_kubernetes_leader 1").await
    })
    .await;

    api.delete("HTTPRoute", NS, "echo");
    eventually("a deleted route stops serving", &server, async || {
        get(http, "echo.example", "/").await.status() == 404
    })
    .await;
    drop(server);
}
