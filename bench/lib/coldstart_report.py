#!/usr/bin/env python3
"""bench/coldstart.sh's results: $WORK/results.jsonl (one line per timed boot) into
build/bench/coldstart.json (merged per link profile with the previous file) and the
`coldstart` section of docs/benchmarks.md (one table per profile in the JSON).
Environment: WORK JSON MD ROOT IDIR RUNS KVER GIT_REV SKIPPED_S NCHUNKS MEM (set by the script).
"""
import datetime, json, os, statistics, subprocess

E = os.environ
BLOCK = 4096
MODE_NAMES = {
    'warm': 'warm (every chunk local)',
    'cold': 'cold, demand fetching',
    'coldnora': 'cold, demand fetching, `--readahead 0`',
    'full': 'full download (curl ×16), then boot',
    'warmed': '`lazyblk warm --trace`, then boot (warm included)',
    'prefetch': 'cold + `--prefetch TRACE`',
    'repacked': 'cold, repacked + `--prefetch`',
}
ORDER = list(MODE_NAMES)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(rows, info):
    ratio = info['chunk_stored_bytes'] / info['chunk_raw_bytes']
    modes = {}
    for mode in ORDER:
        rs = sorted((r for r in rows if r['mode'] == mode), key=lambda r: r['run'])
        if not rs:
            continue
        # a download before the boot (full, warmed) plus what the boot fetched itself
        fetched = [(r['download_bytes'] or 0) + (r['stats']['remote_bytes'] or 0) for r in rs]
        reqs = [(r['download_requests'] or 0) + (r['stats']['remote_requests'] or 0) for r in rs]
        data_read = [r['stats']['blocks_from_chunks'] * BLOCK for r in rs]
        amp = [r['stats']['chunk_loaded_bytes'] / d if d else None
               for r, d in zip(rs, data_read)]
        modes[mode] = {
            'wall_ms': [r['wall_ms'] for r in rs], 'wall_median_ms': med([r['wall_ms'] for r in rs]),
            'pre_ms': [r['pre_ms'] for r in rs], 'boot_ms': [r['boot_ms'] for r in rs],
            'userspace_ms': [r['userspace_ms'] for r in rs],
            'qemu_cpu_ms': [r.get('qemu_cpu_ms') for r in rs],
            'qemu_cpu_median_ms': med([r.get('qemu_cpu_ms') for r in rs]),
            'load1': [r.get('load1') for r in rs],
            'fetched_bytes': fetched, 'fetched_median_bytes': med(fetched),
            'requests': reqs, 'requests_median': med(reqs),
            'link_down_bytes': [r['link_down_bytes'] for r in rs],
            'link_connections': [r['link_connections'] for r in rs],
            'data_read_bytes': data_read, 'data_read_median_bytes': med(data_read),
            'chunk_loaded_bytes': [r['stats']['chunk_loaded_bytes'] for r in rs],
            'read_amplification': amp, 'read_amplification_median': med(amp),
            'stats': [r['stats'] for r in rs],
        }
    w = modes.get('warm', {}).get('wall_median_ms')
    for m in modes.values():
        m['vs_warm'] = m['wall_median_ms'] / w if w else None
    # the data the guest read: the median over every mode's runs (the same workload)
    dr = med([d for m in modes.values() for d in m['data_read_bytes']])
    touched = modes.get('cold', {}).get('fetched_median_bytes')
    res = {'modes': modes, 'data_read_bytes': dr,
           'data_read_compressed_est_bytes': dr * ratio if dr else None,
           'touched_chunks_compressed_bytes': touched}
    g = []
    def goal(name, mode, limit, have):
        m = modes.get(mode)
        if m and m['vs_warm'] is not None:
            g.append({'goal': name, 'value': m['vs_warm'], 'limit': limit,
                      'met': m['vs_warm'] <= limit})
        else:
            g.append({'goal': name, 'value': None, 'limit': limit, 'met': None,
                      'note': 'not measured in this run (' + have + ')'})
    goal('cold repacked + prefetch / warm', 'repacked', 1.3, 'modes warm and repacked')
    goal('cold --prefetch / warm', 'prefetch', 1.8, 'modes warm and prefetch')
    m = modes.get('repacked')
    if m and res['data_read_compressed_est_bytes']:
        v = m['fetched_median_bytes'] / res['data_read_compressed_est_bytes']
        g.append({'goal': 'repacked bytes fetched / compressed data read', 'value': v,
                  'limit': 1.3, 'met': v <= 1.3})
    else:
        g.append({'goal': 'repacked bytes fetched / compressed data read', 'value': None,
                  'limit': 1.3, 'met': None,
                  'note': 'not measured in this run (mode repacked)'})
    res['goals'] = g
    return res


def mib(b):
    return '—' if b is None else '%.1f MiB' % (b / 2**20)


def table(p):
    s = p['summary']
    lines = ['| mode | wall, median | vs warm | runs (s) | QEMU CPU | host load | fetched | requests | read amp. |',
             '|---|---:|---:|---|---:|---|---:|---:|---:|']
    for mode in ORDER:
        m = s['modes'].get(mode)
        if not m:
            continue
        runs = ', '.join('%.1f' % (x / 1000) for x in m['wall_ms'])
        if mode in ('full', 'warmed'):
            runs += ' (download %s)' % ', '.join('%.1f' % (x / 1000) for x in m['pre_ms'])
        ra = m['read_amplification_median']
        cpu = m.get('qemu_cpu_median_ms')
        load = ', '.join('%.1f' % x for x in m.get('load1', []) if x is not None) or '—'
        lines.append('| %s | %.1f s | %s | %s | %s | %s | %s | %s | %s |' % (
            MODE_NAMES[mode], m['wall_median_ms'] / 1000,
            '%.2f×' % m['vs_warm'] if m['vs_warm'] else '—', runs,
            '%.1f s' % (cpu / 1000) if cpu else '—', load,
            mib(m['fetched_median_bytes']) if m['fetched_median_bytes'] else '0',
            '%d' % m['requests_median'] if m['requests_median'] is not None else '—',
            '%.2f×' % ra if ra else '—'))
    return '\n'.join(lines)


def goals_md(p):
    out = []
    for g in p['summary']['goals']:
        if g['value'] is None:
            out.append('- %s ≤ %.1f×: %s' % (g['goal'], g['limit'], g['note']))
        else:
            out.append('- %s ≤ %.1f×: **%.2f×** (%s)' % (g['goal'], g['limit'], g['value'],
                                                      'met' if g['met'] else 'NOT met'))
    return '\n'.join(out)


def main():
    rows = [json.loads(l) for l in open(os.path.join(E['WORK'], 'results.jsonl')) if l.strip()]
    info = json.load(open(os.path.join(E['IDIR'], 'info.json')))
    old = {}
    if os.path.exists(E['JSON']):
        try:
            old = json.load(open(E['JSON']))
        except ValueError:
            old = {}
    profiles = old.get('profiles', {}) if old.get('image', {}).get('key') == info['key'] else {}
    skipped = [s for s in E.get('SKIPPED_S', '').splitlines() if s]
    for prof in sorted({r['profile'] for r in rows}):
        pr = [r for r in rows if r['profile'] == prof]
        profiles[prof] = {'date': datetime.date.today().isoformat(), 'git': E['GIT_REV'],
                          'runs': int(E['RUNS']), 'skipped': skipped,
                          'summary': summarize(pr, info), 'raw': pr}
    res = {'image': info, 'kernel': E['KVER'],
           'qemu': 'TCG, -smp 1, %s MiB, vhost-user-blk' % E['MEM'], 'profiles': profiles}
    json.dump(res, open(E['JSON'], 'w'), indent=1)

    ratio = info['chunk_stored_bytes'] / info['chunk_raw_bytes']
    parts = []
    for prof in sorted(profiles, key=lambda k: (k == 'none', k)):
        p = profiles[prof]
        s = p['summary']
        link = ('no link emulator (nginx on loopback directly)' if prof == 'none' else
                'linkem %s (rate / round-trip time)' % prof)
        parts.append(f"""### link: {link} — {p['date']}, {p['runs']} run(s) per mode, lazyblk {p['git']}

{table(p)}

- data the guest read from chunks: {mib(s['data_read_bytes'])} (≈ {mib(s['data_read_compressed_est_bytes'])} compressed
  at the image's ratio); chunks it touched (cold mode's fetch): {mib(s['touched_chunks_compressed_bytes'])} compressed,
  of {mib(info['chunk_stored_bytes'])} for the whole image.
{goals_md(p)}""" + ('\n- not run: ' + '; '.join(p['skipped']) if p['skipped'] else ''))
    md = f"""## coldstart: `python3 -c "import numpy, sqlite3"` in a cold guest over an emulated link

Image (`bench/lib/realistic_image.sh`): Debian bookworm minbase + python3 + python3-numpy +
sqlite3 — {info['files']:,} files, {mib(info['file_bytes'])} of file data; {info['chunks']} chunks,
{mib(info['chunk_raw_bytes'])} raw, **{mib(info['chunk_stored_bytes'])} compressed** (zstd 3, {ratio:.2f}). Guest: Debian's
{res['kernel']} under QEMU {res['qemu']} from `lazyblk serve`; the chunks come from a
private nginx on 127.0.0.1, through the link emulator when a profile is given. Time: QEMU's
start to the console's `lazyblk-exit: 0` (the command done, the disk synced and unmounted),
plus the download for the "full" mode. "fetched": serve's `remote_bytes` (compressed chunk
bytes) or the downloader's byte count. "read amp.": `chunk_loaded_bytes` / (`blocks_from_chunks` × 4096)
of serve's --stats-json: decompressed chunk bytes loaded per byte of file data the guest
read. "QEMU CPU": median user + system CPU time of QEMU (the guest's work under TCG);
"host load": the 1-minute load average at each run's start (2 CPUs shared with other work:
wall times vary with it). Method: header of `bench/coldstart.sh`.

""" + '\n\n'.join(parts) + '\n'
    subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'coldstart'],
                   input=md, text=True, check=True)
    print(md)


main()
