"""Andrews' squeezer as the IVP test set writes it (Hairer and Wanner, VII.7): the mass matrix,
forces and constraints by hand, in numpy, nothing of mbforge. The reference for the shipped
example `andrews`: its accelerations at any state and its motion (the index-1 form
[M G^T; G 0] [qdd; lam] = [f; -g_qq(qd, qd)] by scipy's DOP853, positions and velocities
projected back onto the constraints at every output)."""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

m1, m2, m3, m4, m5, m6, m7 = .04325, .00365, .02373, .00706, .07050, .00706, .05498
xa, ya, xb, yb, xc, yc, c0 = -.06934, -.00227, -.03635, .03273, .014, .072, 4530.0
i1, i2, i3, i4, i5, i6, i7 = 2.194e-6, 4.410e-7, 5.255e-6, 5.667e-7, 1.169e-5, 5.667e-7, 1.912e-5
d, da, e, ea, rr, ra, l0 = 28e-3, 115e-4, 2e-2, 1421e-5, 7e-3, 92e-5, 7785e-5
ss, sa, sb, sc, sd = 35e-3, 1874e-5, 1043e-5, 18e-3, 2e-2
ta, tb, u, ua, ub, zf, zt, fa, mom = 2308e-5, 916e-5, 4e-2, 1228e-5, 449e-5, 2e-2, 4e-2, 1421e-5, 33e-3

# the test set's initial values (andrews.f INIT) and its reference solution at t = 0.03
# (andrews.f SOLN, PSIDE at rtol = atol = 1e-14), positions then velocities
Q0 = np.array([-0.0617138900142764496358948458001, 0.0, 0.455279819163070380255912382449,
               0.222668390165885884674473185609, 0.487364979543842550225598953530,
               -0.222668390165885884674473185609, 1.23054744454982119249735015568])
QDD0 = np.array([14222.4439199541138705911625887, -10666.8329399655854029433719415, 0, 0, 0, 0, 0])
Q_REF = np.array([0.1581077119629904e+2, -0.1575637105984298e+2, 0.4082224013073101e-1,
                  -0.5347301163226948, 0.5244099658805304, 0.5347301163226948, 0.1048080741042263e+1])
QD_REF = np.array([0.1139920302151208e+4, -0.1424379294994111e+4, 0.1103291221937134e+2,
                   0.1929337464421385e+2, 0.5735699284790808, -0.1929337464421385e+2, 0.3231791658026955])
T_END = 0.03


def mass(q):
    _, th, _, ph, _, om, _ = q
    M = np.zeros((7, 7))
    M[0, 0] = m1 * ra ** 2 + m2 * (rr ** 2 - 2 * da * rr * np.cos(th) + da ** 2) + i1 + i2
    M[1, 0] = M[0, 1] = m2 * (da ** 2 - da * rr * np.cos(th)) + i2
    M[1, 1] = m2 * da ** 2 + i2
    M[2, 2] = m3 * (sa ** 2 + sb ** 2) + i3
    M[3, 3] = m4 * (e - ea) ** 2 + i4
    M[4, 3] = M[3, 4] = m4 * ((e - ea) ** 2 + zt * (e - ea) * np.sin(ph)) + i4
    M[4, 4] = m4 * (zt ** 2 + 2 * zt * (e - ea) * np.sin(ph) + (e - ea) ** 2) + m5 * (ta ** 2 + tb ** 2) + i4 + i5
    M[5, 5] = m6 * (zf - fa) ** 2 + i6
    M[6, 5] = M[5, 6] = m6 * ((zf - fa) ** 2 - u * (zf - fa) * np.sin(om)) + i6
    M[6, 6] = m6 * ((zf - fa) ** 2 - 2 * u * (zf - fa) * np.sin(om) + u ** 2) + m7 * (ua ** 2 + ub ** 2) + i6 + i7
    return M


def forces(q, qd):
    be, th, ga, ph, de, om, ep = q
    bep, thp, _, php, dep, omp, epp = qd
    xd = sd * np.cos(ga) + sc * np.sin(ga) + xb
    yd = sd * np.sin(ga) - sc * np.cos(ga) + yb
    lang = np.hypot(xd - xc, yd - yc)
    force = -c0 * (lang - l0) / lang
    fx, fy = force * (xd - xc), force * (yd - yc)
    return np.array([
        mom - m2 * da * rr * thp * (thp + 2 * bep) * np.sin(th),
        m2 * da * rr * bep ** 2 * np.sin(th),
        fx * (sc * np.cos(ga) - sd * np.sin(ga)) + fy * (sd * np.cos(ga) + sc * np.sin(ga)),
        m4 * zt * (e - ea) * dep ** 2 * np.cos(ph),
        -m4 * zt * (e - ea) * php * (php + 2 * dep) * np.cos(ph),
        -m6 * u * (zf - fa) * epp ** 2 * np.cos(om),
        m6 * u * (zf - fa) * omp * (omp + 2 * epp) * np.cos(om)])


def constraints(q):
    be, th, ga, ph, de, om, ep = q
    ex = rr * np.cos(be) - d * np.cos(be + th)
    ey = rr * np.sin(be) - d * np.sin(be + th)
    return np.array([ex - ss * np.sin(ga) - xb, ey + ss * np.cos(ga) - yb,
                     ex - e * np.sin(ph + de) - zt * np.cos(de) - xa, ey + e * np.cos(ph + de) - zt * np.sin(de) - ya,
                     ex - zf * np.cos(om + ep) - u * np.sin(ep) - xa, ey - zf * np.sin(om + ep) + u * np.cos(ep) - ya])


def jacobian(q):
    """G = dg/dq as the test set writes it (andrews.f, gp); analytic in q, so complex q works."""
    be, th, ga, ph, de, om, ep = q
    s1, c1 = -rr * np.sin(be) + d * np.sin(be + th), rr * np.cos(be) - d * np.cos(be + th)
    s2, c2 = d * np.sin(be + th), -d * np.cos(be + th)
    G = np.zeros((6, 7), dtype=np.result_type(q, float))
    G[0::2, 0], G[1::2, 0], G[0::2, 1], G[1::2, 1] = s1, c1, s2, c2
    G[0, 2], G[1, 2] = -ss * np.cos(ga), -ss * np.sin(ga)
    G[2, 3], G[2, 4] = -e * np.cos(ph + de), -e * np.cos(ph + de) + zt * np.sin(de)
    G[3, 3], G[3, 4] = -e * np.sin(ph + de), -e * np.sin(ph + de) - zt * np.cos(de)
    G[4, 5], G[4, 6] = zf * np.sin(om + ep), zf * np.sin(om + ep) - u * np.cos(ep)
    G[5, 5], G[5, 6] = -zf * np.cos(om + ep), -zf * np.cos(om + ep) - u * np.sin(ep)
    return G


def accelerations(q, qd):
    """(qdd, lam) of [M G^T; G 0] [qdd; lam] = [f; -g_qq(qd, qd)]; g_qq(qd, qd) = d/ds G(q + s qd) qd
    by the complex step (exact to rounding)."""
    h = 1e-30
    gqq = (jacobian(q + 1j * h * qd).imag / h) @ qd
    G = jacobian(q)
    K = np.block([[mass(q), G.T], [G, np.zeros((6, 6))]])
    x = np.linalg.solve(K, np.concatenate([forces(q, qd), -gqq]))
    return x[:7], x[7:]


def project(q, qd):
    """q, qd moved onto the constraints (Gauss-Newton on q, the least-squares correction of qd)."""
    for _ in range(8):
        G = jacobian(q)
        q = q - G.T @ np.linalg.solve(G @ G.T, constraints(q))
    G = jacobian(q)
    return q, qd - G.T @ np.linalg.solve(G @ G.T, G @ qd)


def motion(times, rtol=1e-12):
    """(q, qd) at `times` from the test set's initial state (t = 0)."""
    sol = solve_ivp(lambda _t, y: np.concatenate([y[7:], accelerations(y[:7], y[7:])[0]]), (0.0, times[-1]),
                    np.concatenate([Q0, np.zeros(7)]), method="DOP853", t_eval=times, rtol=rtol, atol=rtol)
    assert sol.success, sol.message
    out = [project(y[:7], y[7:]) for y in sol.y.T]
    return np.array([a for a, _ in out]), np.array([b for _, b in out])
