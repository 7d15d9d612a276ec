import { linkQuery, parseLink, withoutLink } from '../src/links';

describe('links', () => {
  it('reads the view a URL names', () => {
    expect(parseLink('?kubelab=run/0mz8k3c2qf7a')).toEqual({
      kind: 'run',
      ids: ['0mz8k3c2qf7a']
    });
    expect(parseLink('?reset&kubelab=compare/a1,b2')).toEqual({
      kind: 'compare',
      ids: ['a1', 'b2']
    });
    expect(parseLink('?kubelab=diff/a1,b2')).toEqual({
      kind: 'diff',
      ids: ['a1', 'b2']
    });
    expect(parseLink('?kubelab=sweep%2Fs1')).toEqual({
      kind: 'sweep',
      ids: ['s1']
    });
  });

  it('refuses what it cannot open', () => {
    for (const search of [
      '',
      '?kubelab=',
      '?kubelab=run',
      '?kubelab=job/x',
      '?kubelab=run/a,b',
      '?kubelab=run/../../etc',
      '?kubelab=compare/',
      '?kubelab=diff/a1',
      '?kubelab=diff/a1,b2,c3'
    ]) {
      expect(parseLink(search)).toBeNull();
    }
  });

  it('writes the query it reads', () => {
    const link = { kind: 'compare' as const, ids: ['a1', 'b2'] };
    expect(parseLink(linkQuery(link))).toEqual(link);
  });

  it('drops only its own parameter', () => {
    expect(withoutLink('?kubelab=run/x&token=t')).toBe('?token=t');
    expect(withoutLink('?kubelab=run/x')).toBe('');
  });
});
