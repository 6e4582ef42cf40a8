#!/usr/bin/env python3
"""Paired TPS ratios of every configuration of an `untorn bench --json` file
against one of them (default `off`), by round, with 95 % t intervals on the
log ratios: the rule of src/lab/confidence.rs, for a baseline the report
does not show. Usage: scripts/ratios_vs.py RESULTS.json ["BASELINE NAME"]
(names as printed: "off", "full_pages", "double_writes 64MB defer=on keep=on")."""
import json,math,sys
T={2:12.706,3:4.303,4:3.182,5:2.776,6:2.571,7:2.447,8:2.365,9:2.306,10:2.262}
d=json.load(open(sys.argv[1]))
def name(r):
    s=r['settings']; n=s['torn_page_protection']
    if n=='double_writes': n+=' %dMB defer=%s keep=%s'%(int(s['double_write_buffer_size'])>>20, s['double_write_defer_in_place'], s.get('double_write_keep_deferred','off'))
    if s.get('wal_compression','off')!='off': n+=' +'+s['wal_compression']
    return n
by={}
for r in d: by.setdefault(r['workload'],[]).append(r)
base=sys.argv[2] if len(sys.argv)>2 else 'off'
for w,rs in by.items():
    b=[r for r in rs if name(r)==base][0]
    bt={x['repeat']:x['tps'] for x in b['runs'] if not x.get('excluded')}
    print(w)
    for r in rs:
        t={x['repeat']:x['tps'] for x in r['runs'] if not x.get('excluded')}
        L=[math.log(t[k]/bt[k]) for k in t if k in bt]
        n=len(L); m=sum(L)/n; sd=(sum((x-m)**2 for x in L)/(n-1))**.5 if n>1 else 0
        h=T.get(n,2)*sd/n**.5
        print('  %-32s %8.0f  %.2fx [%.2f, %.2f]  cpu %.1f  writes/txn %.2f  dw_fsyncs %d  data_fsyncs %d'%(name(r),r['tps'],math.exp(m),math.exp(m-h),math.exp(m+h),r['cpu_us_per_txn'],r['page_writes_per_txn'],r['dw_fsyncs'],r['data_fsyncs']))
