//! The candidate index of large tables answers exactly as the scan does:
//! tables of every kind of route (exact, prefix, pattern with whole-segment,
//! in-segment and escaped parameters; methods, headers, query) built both
//! ways, asked the same paths; and every route whose path matches is among
//! the candidates, whether or not an earlier route shadows it.

use super::*;

/// A small deterministic generator (xorshift), so a failure repeats.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

const SEGMENTS: [&str; 7] = ["a", "b", "api", "v1", "x", "", "é"];

/// Pattern segments: whole-segment and in-segment parameters, escaped braces.
const PARAMETERS: [&str; 4] = ["{p}", "a{p}", "{p}.json", "{{b}}"];

fn random_path(rng: &mut Rng) -> String {
    let mut path = String::new();
    for _ in 0..=rng.below(4) {
        path.push('/');
        path.push_str(SEGMENTS[rng.below(SEGMENTS.len())]);
    }
    path
}

fn random_table(rng: &mut Rng, routes: usize, min_routes: usize) -> RouteTable<&'static str> {
    const TARGETS: [&str; 8] = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"];
    let mut builder = RouteTableBuilder::new();
    for _ in 0..routes {
        let mut path = random_path(rng);
        let kind = rng.below(3);
        if kind == 2 {
            // A parameter in some segment (the first one now and then).
            let at = rng.below(3);
            let mut segments: Vec<String> = path.split('/').skip(1).map(str::to_owned).collect();
            let at = at.min(segments.len() - 1);
            if let Some(segment) = segments.get_mut(at) {
                *segment = PARAMETERS[rng.below(PARAMETERS.len())].into();
            }
            if rng.below(4) == 0 {
                segments.push("{*rest}".into());
            }
            path = format!("/{}", segments.join("/"));
        }
        let path = match kind {
            0 => PathMatch::Exact(path),
            1 => PathMatch::Prefix(path),
            _ => PathMatch::Pattern(path),
        };
        let mut route = spec(path, TARGETS[rng.below(TARGETS.len())]);
        if rng.below(3) == 0 {
            route.methods = Some(vec![[Method::GET, Method::POST][rng.below(2)].clone()]);
        }
        if rng.below(4) == 0 {
            route.headers = vec![(
                HeaderName::from_static("x-v"),
                HeaderValue::from_static("1"),
            )];
        }
        if rng.below(6) == 0 {
            route.query = vec![("q".into(), "1".into())];
        }
        // Invalid patterns (a catch-all not at the end, a conflict) are refused: skipped.
        let _ = builder.route(route);
    }
    builder.build_indexed_from(min_routes)
}

fn answer(
    table: &RouteTable<&'static str>,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> String {
    match table.route(method, path, query, headers) {
        Ok(found) => format!("{} {:?}", found.target, found.params),
        Err(error) => format!("{error:?}"),
    }
}

#[test]
fn the_index_answers_as_the_scan_does() {
    let mut with_header = HeaderMap::new();
    with_header.insert(
        HeaderName::from_static("x-v"),
        HeaderValue::from_static("1"),
    );
    let plain = HeaderMap::new();
    let mut checked = 0;
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let routes = 1 + rng.below(40);
        let mut a = Rng(rng.0);
        let mut b = Rng(rng.0);
        let indexed = random_table(&mut a, routes, 0);
        let scanned = random_table(&mut b, routes, usize::MAX);
        assert!(indexed.is_indexed() || indexed.is_prefix_only());
        let odd = ["a", "", "/a//b", "//", "/é/x", "/a/é.json", "/{b}"];
        let paths: Vec<String> = (0..60)
            .map(|_| random_path(&mut rng))
            .chain(odd.iter().map(|p| p.to_string()))
            .collect();
        for path in paths {
            // Every route whose path matches is a candidate, shadowed or not.
            if let Some(candidates) = indexed.candidates(&path) {
                for (i, route) in indexed.routes().iter().enumerate() {
                    if route.match_path(&path).is_some() {
                        assert!(candidates.contains(&i), "seed {seed}, {path}: route {i}");
                    }
                }
            }
            for method in [Method::GET, Method::POST] {
                for headers in [&plain, &with_header] {
                    for query in [None, Some("q=1")] {
                        assert_eq!(
                            answer(&indexed, &method, &path, query, headers),
                            answer(&scanned, &method, &path, query, headers),
                            "seed {seed}, {method} {path}"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 300 * 67 * 8);
}

#[test]
fn odd_paths_reach_the_same_routes() {
    let mut builder = RouteTableBuilder::new();
    for route in [
        prefix("/", "root"),
        prefix("/a", "a"),
        exact("/a/b", "ab"),
        pattern("/{x}/c", "xc"),
        pattern("/a/{y}", "ay"),
        with_methods(prefix("/api", "api-post"), &[Method::POST]),
    ] {
        builder.route(route).unwrap();
    }
    let indexed = builder.build_indexed_from(0);
    assert!(indexed.is_indexed());
    let h = HeaderMap::new();
    for path in [
        "/", "//", "//a", "/a", "/a/", "/a/b", "/a/b/", "/q/c", "/a/c", "/api", "/api/x", "/apix",
        "",
    ] {
        let fast = indexed
            .route(&Method::GET, path, None, &h)
            .map(|m| *m.target);
        let slow = indexed
            .scan(0..indexed.len(), &Method::GET, path, None, &h)
            .map(|m| *m.target);
        assert_eq!(fast, slow, "{path:?}");
    }
}
