import jax
import jax.numpy as jnp


def init_params(key, layers):
    params = []
    for n_in, n_out in zip(layers[:-1], layers[1:]):
        key, sub = jax.random.split(key)
        params.append(jax.random.normal(sub, (n_in, n_out)) * 0.01)
    return params


def main():
    print("jax", jax.__version__, jax.devices())
    params = init_params(jax.random.PRNGKey(0), [1024, 65536, 65536, 65536, 65536, 1024])
    x = jnp.ones((8, 1024))
    for w in params:
        x = jnp.tanh(x @ w)
    print(x.sum())


if __name__ == "__main__":
    main()
